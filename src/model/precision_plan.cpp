#include "model/precision_plan.h"

#include "core/int8_grid.h"

namespace stoa {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

const char* carrier_name(Carrier carrier) {
  switch (carrier) {
    case Carrier::kInt8Grid:
      return "int8";
    case Carrier::kBf16:
      return "bf16";
    case Carrier::kF32:
      return "f32";
  }
  return "unknown";
}

bool is_moe_router(const std::string& name) {
  return ends_with(name, ".feed_forward.gate.weight");
}

Carrier carrier_for(const std::string& name, const Shape& shape) {
  // Routing inputs first: they stay f32 whatever their shape.
  if (is_moe_router(name) || ends_with(name, ".expert_bias")) return Carrier::kF32;
  if (int8_grid_fits(shape)) return Carrier::kInt8Grid;
  return Carrier::kBf16;
}

}  // namespace stoa
