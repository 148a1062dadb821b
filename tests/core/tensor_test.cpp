#include <gtest/gtest.h>

#include "core/tensor.h"

namespace stoa {
namespace {

TEST(Tensor, AllocatesAlignedZeroedAndConverts) {
  Tensor t(DType::kF32, {3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.nbytes(), 60u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(t.as<float>()[i], 0.0f);
  t.as<float>()[7] = 1.5f;
  Tensor h = convert_float(t.view(), DType::kBF16);
  Tensor back = to_f32(h.view());
  EXPECT_EQ(back.as<float>()[7], 1.5f);
  EXPECT_EQ(shape_string(back.shape()), "[3, 5]");
  EXPECT_THROW(t.reshape({4, 4}), Error);
  EXPECT_THROW(Tensor(DType::kF32, {-1}), Error);
}

}  // namespace
}  // namespace stoa
