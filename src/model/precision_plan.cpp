#include "model/precision_plan.h"

#include "core/enum_names.h"
#include "core/int8_grid.h"
#include "model/tensor_roles.h"

namespace stoa {

constexpr EnumName<Carrier> kCarrierNames[] = {
    {Carrier::kInt8Grid, "int8"}, {Carrier::kBf16, "bf16"}, {Carrier::kF32, "f32"}};

const char* carrier_name(Carrier carrier) {
  return enum_name(kCarrierNames, carrier, "unknown");
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
