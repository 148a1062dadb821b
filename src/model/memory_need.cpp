#include "model/memory_need.h"

#include <algorithm>

#include "core/tensor.h"
#include "model/arch_registry.h"
#include "model/tensor_roles.h"

namespace stoa {

MemoryNeed memory_needed(const ModelConfig& config) {
  MemoryNeed n;
  n.weights_bytes = static_cast<uint64_t>(std::max<int64_t>(0, count_parameters(config)));
  n.margin_bytes = std::max<uint64_t>(512ull << 20, n.weights_bytes / 4);
  return n;
}

MemoryNeed memory_needed(const ModelConfig& config, LayerSpan span) {
  if (span.whole(config)) return memory_needed(config);
  MemoryNeed n;
  for (const TensorSlot& slot : span_tensor_slots(config, span))
    n.weights_bytes += static_cast<uint64_t>(shape_numel(slot.shape));
  n.margin_bytes = std::max<uint64_t>(512ull << 20, n.weights_bytes / 4);
  return n;
}

}  // namespace stoa
