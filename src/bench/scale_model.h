// The model side of `stoa bench scale`: the preset's config (optionally cut to fewer layers, for
// CI-sized runs and for machines the whole model does not fit), and the anchor a hub publishes,
// written tensor by tensor from the int8 model directory's Q8_0 GGUF (pulse/anchor_writer.h) —
// the bench process never holds the model.
#pragma once
#include <cstdint>
#include <string>

#include "core/hash.h"
#include "model/config.h"
#include "pulse/blob_store.h"
#include "pulse/catalog.h"

namespace stoa::bench {

// preset_config(preset), with only its first `layers` layers when layers > 0 (the layer kinds
// and the dense/MoE split kept as far as they reach).
ModelConfig scale_config(const std::string& preset, int layers);

struct AnchorFromModel {
  pulse::CatalogEntry entry;
  Hash128 state_hash;
  uint64_t int8_bytes = 0;  // the int8 view: int8 values + f16 scales + bf16/f32 tensors
  double seconds = 0;
};

// Writes version `version`'s anchor of the int8 model in `model_dir` (config.json +
// model.gguf) into `store` (tensor by tensor) and returns its catalog entry.
AnchorFromModel write_anchor_from_model(const std::string& model_dir, pulse::BlobStore& store,
                                        uint64_t version);

}  // namespace stoa::bench
