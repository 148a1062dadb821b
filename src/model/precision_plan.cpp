#include "model/precision_plan.h"

#include "core/int8_grid.h"
#include "model/tensor_roles.h"

namespace stoa {

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
  return tensor_has_role(name, TensorRole::kRouter);
}

Carrier carrier_for(const std::string& name, const Shape& shape) {
  // Routing inputs first (the tables' precision class): they stay f32 whatever their shape.
  if (tensor_precision(name) != TensorPrecision::kByShape) return Carrier::kF32;
  if (int8_grid_fits(shape)) return Carrier::kInt8Grid;
  return Carrier::kBf16;
}

}  // namespace stoa
