// Checks that a model read back from a bf16 export is the bf16 rounding of the f32 weights it was
// exported from, bit for bit, in every tensor (the exporter's rounding is round-to-nearest-even).
#pragma once
#include <gtest/gtest.h>

#include <cstring>

#include "core/dtype.h"
#include "model/weights.h"

namespace stoa::test {

inline void expect_bf16_of(const ModelWeights& got, const ModelWeights& expected) {
  ASSERT_EQ(got.tensors.size(), expected.tensors.size());
  for (const auto& [name, tensor] : expected.tensors) {
    const float* a = tensor.as<float>();
    const float* b = got.at(name).as<float>();
    for (int64_t k = 0; k < tensor.numel(); ++k) {
      const float want = bf16_to_f32(f32_to_bf16(a[k]));
      ASSERT_EQ(std::memcmp(&b[k], &want, 4), 0) << name << "[" << k << "]";
    }
  }
}

}  // namespace stoa::test
