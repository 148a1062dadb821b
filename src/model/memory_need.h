// What a model, or a pipeline stage's share of it, needs in memory on a worker: its int8 weights
// (one byte a parameter) and a margin for the KV cache, activations and the runtime. The worker
// checks it before a download (roles/worker/memory_check.h); the hub forms pipeline groups with
// it (roles/hub/groups/pipeline_groups.h).
#pragma once
#include <cstdint>

#include "model/config.h"
#include "model/layer_span.h"

namespace stoa {

struct MemoryNeed {
  uint64_t weights_bytes = 0;  // the model's int8 weights (one byte per parameter)
  uint64_t margin_bytes = 0;   // KV cache, activations, the runtime: max(512 MiB, weights / 4)
  uint64_t total() const { return weights_bytes + margin_bytes; }
};
MemoryNeed memory_needed(const ModelConfig& config);
// A pipeline stage's need: its span's tensors.
MemoryNeed memory_needed(const ModelConfig& config, LayerSpan span);

}  // namespace stoa
