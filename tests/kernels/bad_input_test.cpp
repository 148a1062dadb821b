// Malformed shapes and ranges are refused with std::invalid_argument naming the problem.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "kernels/matmul_int8.h"
#include "kernels/matmul_int8_packed.h"
#include "kernels/vec_ops.h"

namespace stoa::kernels {
namespace {

template <typename Fn>
void expect_refused(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "accepted bad input; expected an error mentioning '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(KernelsBadInput, MatmulShapesAndRanges) {
  std::vector<int8_t> values(64 * 4);
  std::vector<uint16_t> scales(8);
  std::vector<float> x(64 * 2), y(8);
  Int8Weights w{values.data(), scales.data(), 4, 64};
  Int8Weights odd = w;
  odd.cols = 48;
  expect_refused([&] { matmul_w8a32(odd, x.data(), 64, 1, y.data(), 4, 0, 4); }, "48");
  expect_refused([&] { matmul_w8a32(w, x.data(), 64, 1, y.data(), 4, 0, 5); }, "row range");
  expect_refused([&] { matmul_w8a32(w, x.data(), 64, 1, y.data(), 4, 3, 2); }, "row range");
  expect_refused([&] { matmul_w8a32(w, x.data(), 64, 2, y.data(), 3, 0, 4); }, "y_stride");
  Int8Weights null_w = w;
  null_w.values = nullptr;
  expect_refused([&] { matmul_w8a32(null_w, x.data(), 64, 1, y.data(), 4, 0, 4); }, "empty");

  std::vector<int8_t> q(128);
  std::vector<float> d(4);
  Q8Activations acts{q.data(), d.data(), 2, 64};
  Q8Activations wrong_cols{q.data(), d.data(), 2, 96};
  expect_refused([&] { matmul_w8a8(w, wrong_cols, y.data(), 4, 0, 4); }, "96");
  expect_refused([&] { matmul_w8a8(w, acts, y.data(), 4, -1, 4); }, "row range");
  Q8Activations odd_acts{q.data(), d.data(), 1, 33};
  expect_refused([&] { quantize_activations_q8(x.data(), 64, odd_acts); }, "33");
  expect_refused([&] { quantize_activations_q8(x.data(), 32, acts); }, "x_stride");
  expect_refused([&] { dequantize_q8_row(w, 4, y.data()); }, "row 4");
  expect_refused([&] { logsumexp(x.data(), 0); }, "empty");
}

TEST(KernelsBadInput, PackedMatmul) {
  std::vector<int8_t> values(64 * 20);
  std::vector<uint16_t> scales(40);
  std::vector<float> y(2 * 20);
  Int8Weights w{values.data(), scales.data(), 20, 64};
  Int8Weights odd = w;
  odd.cols = 48;
  expect_refused([&] { PackedInt8::pack(odd); }, "48");
  Int8Weights none = w;
  none.rows = 0;
  expect_refused([&] { PackedInt8::pack(none); }, "no rows");
  const PackedInt8 packed = PackedInt8::pack(w);
  std::vector<int8_t> q(128);
  std::vector<float> d(4);
  std::vector<int32_t> sums(4);
  Q8Activations acts{q.data(), d.data(), 2, 64, sums.data()};
  Q8Activations no_sums{q.data(), d.data(), 2, 64};
  Q8Activations wrong_cols{q.data(), d.data(), 2, 96, sums.data()};
  expect_refused([&] { matmul_w8a8_packed(PackedInt8{}, acts, y.data(), 20, 0, 20); }, "empty");
  expect_refused([&] { matmul_w8a8_packed(packed, no_sums, y.data(), 20, 0, 20); }, "sums");
  expect_refused([&] { matmul_w8a8_packed(packed, wrong_cols, y.data(), 20, 0, 20); }, "96");
  expect_refused([&] { matmul_w8a8_packed(packed, acts, y.data(), 20, 0, 21); }, "row range");
  expect_refused([&] { matmul_w8a8_packed(packed, acts, y.data(), 19, 0, 20); }, "y_stride");
}

TEST(KernelsBadInput, RopeOddHeadDim) {
  std::vector<float> x(6), c(3), s(3);
  expect_refused([&] { rope_rotate_half(x.data(), 2, 3, c.data(), s.data()); }, "odd");
}

}  // namespace
}  // namespace stoa::kernels
