// Int8 matmul kernels against their scalar references, on every SIMD target, plus the batch
// invariance guarantee: a row's output bits do not depend on the batch or the row split.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/int8_grid.h"
#include "kernels/matmul_int8.h"
#include "kernels/random_weights.h"
#include "kernels/reference.h"
#include "kernels/target_loop.h"

namespace stoa::kernels {
namespace {

struct Problem {
  Int8Matrix w;
  std::vector<float> x;  // batch * cols
  int64_t batch = 0;
  Int8Weights view() const { return {w.values.data(), w.scales.data(), w.rows, w.cols}; }
};

Problem make_problem(int64_t rows, int64_t cols, int64_t batch, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.w = test::random_int8_weights(rows, cols, rng);
  p.batch = batch;
  p.x = test::random_activations(batch, cols, rng);
  return p;
}

struct Quantized {
  std::vector<int8_t> values;
  std::vector<float> scales;
  Q8Activations acts;
};

Quantized quantize(const float* x, int64_t batch, int64_t cols) {
  Quantized q;
  q.values.assign(static_cast<size_t>(batch * cols), -99);
  q.scales.assign(static_cast<size_t>(batch * cols / 32), -1.0f);
  q.acts = {q.values.data(), q.scales.data(), batch, cols};
  quantize_activations_q8(x, cols, q.acts);
  return q;
}

TEST(QuantizeQ8, MatchesReferenceExactly) {
  test::for_each_target([] {
    for (int64_t cols : {32, 64, 96, 320}) {
      Problem p = make_problem(1, cols, 5, 11 + static_cast<uint32_t>(cols));
      // Exact ties: amax 127 gives d = 1, so x.5 values must round away from zero (roundf).
      const float ties[] = {127.0f, 2.5f, -3.5f, 0.5f, -0.5f, 1.5f, -126.5f};
      for (size_t i = 0; i < std::size(ties); ++i) p.x[static_cast<size_t>(cols) + i] = ties[i];
      Quantized got = quantize(p.x.data(), p.batch, cols);
      std::vector<int8_t> want_v(got.values.size());
      std::vector<float> want_s(got.scales.size());
      ref::quantize_activations_q8(p.x.data(), cols, {want_v.data(), want_s.data(), p.batch, cols});
      EXPECT_EQ(got.values, want_v) << "cols " << cols;
      EXPECT_EQ(0, std::memcmp(got.scales.data(), want_s.data(), want_s.size() * 4));
      EXPECT_EQ(got.values[static_cast<size_t>(cols) + 1], 3);
      EXPECT_EQ(got.values[static_cast<size_t>(cols) + 2], -4);
      EXPECT_EQ(got.values[static_cast<size_t>(cols) + 6], -127);
    }
  });
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const std::vector<double>& abs_sum, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = 2e-6 * abs_sum[i] + 1e-30;
    ASSERT_NEAR(got[i], want[i], tol) << what << " element " << i;
  }
}

TEST(MatmulW8A8, MatchesReferenceOverShapes) {
  test::for_each_target([] {
    for (int64_t rows : {1, 3, 8, 13, 33}) {
      for (int64_t cols : {32, 64, 288, 1024}) {
        for (int64_t batch : {1, 2, 3, 4, 5, 9}) {
          Problem p =
              make_problem(rows, cols, batch, static_cast<uint32_t>(rows * 7 + cols + batch));
          Quantized q = quantize(p.x.data(), batch, cols);
          std::vector<float> y(static_cast<size_t>(batch * rows), NAN);
          matmul_w8a8(p.view(), q.acts, y.data(), rows, 0, rows);
          std::vector<double> want(y.size()), abs_sum(y.size());
          ref::matmul_w8a8(p.view(), q.acts, want.data(), abs_sum.data(), rows);
          SCOPED_TRACE(testing::Message() << rows << "x" << cols << " batch " << batch);
          expect_close(y, want, abs_sum, "w8a8");
        }
      }
    }
  });
}

TEST(MatmulW8A32, MatchesReferenceOverShapes) {
  test::for_each_target([] {
    for (int64_t rows : {1, 3, 8, 13, 33}) {
      for (int64_t cols : {32, 64, 288, 1024}) {
        for (int64_t batch : {1, 2, 3, 4, 5, 9}) {
          Problem p =
              make_problem(rows, cols, batch, static_cast<uint32_t>(rows * 5 + cols + batch));
          std::vector<float> y(static_cast<size_t>(batch * rows), NAN);
          matmul_w8a32(p.view(), p.x.data(), cols, batch, y.data(), rows, 0, rows);
          std::vector<double> want(y.size()), abs_sum(y.size());
          ref::matmul_w8a32(p.view(), p.x.data(), cols, batch, want.data(), abs_sum.data(), rows);
          SCOPED_TRACE(testing::Message() << rows << "x" << cols << " batch " << batch);
          expect_close(y, want, abs_sum, "w8a32");
        }
      }
    }
  });
}

TEST(DequantizeQ8, MatchesCoreExactly) {
  test::for_each_target([] {
    Problem p = make_problem(7, 288, 0, 17);
    std::vector<float> want(7 * 288), got(288);
    int8_dequantize(p.w, want.data());
    for (int64_t r = 0; r < 7; ++r) {
      dequantize_q8_row(p.view(), r, got.data());
      EXPECT_EQ(0, std::memcmp(got.data(), &want[r * 288], 288 * 4)) << r;
    }
  });
}

// Extreme grid values: -128 weights (possible in foreign Q8_0 files) against +-127 activations,
// where any saturating or sign trick would show.
TEST(MatmulW8A8, ExtremeValuesAreExact) {
  test::for_each_target([] {
    const int64_t rows = 9, cols = 96, batch = 3;
    Problem p = make_problem(rows, cols, batch, 23);
    for (size_t i = 0; i < p.w.values.size(); ++i)
      p.w.values[i] = static_cast<int8_t>(i % 3 == 0 ? -128 : (i % 3 == 1 ? 127 : -127));
    for (size_t i = 0; i < p.x.size(); ++i) p.x[i] = (i % 5 == 0) ? -1.0f : 1.0f;
    Quantized q = quantize(p.x.data(), batch, cols);
    std::vector<float> y(static_cast<size_t>(batch * rows));
    matmul_w8a8(p.view(), q.acts, y.data(), rows, 0, rows);
    std::vector<double> want(y.size()), abs_sum(y.size());
    ref::matmul_w8a8(p.view(), q.acts, want.data(), abs_sum.data(), rows);
    expect_close(y, want, abs_sum, "extreme w8a8");
    std::vector<float> y32(y.size());
    matmul_w8a32(p.view(), p.x.data(), cols, batch, y32.data(), rows, 0, rows);
    ref::matmul_w8a32(p.view(), p.x.data(), cols, batch, want.data(), abs_sum.data(), rows);
    expect_close(y32, want, abs_sum, "extreme w8a32");
  });
}

// Strided input/output views and a partial row range: only the requested rows are written.
TEST(MatmulInt8, RowRangeAndStridesWriteOnlyTheirOutputs) {
  test::for_each_target([] {
    const int64_t rows = 21, cols = 96, batch = 3, x_stride = 128, y_stride = 40;
    Problem p = make_problem(rows, cols, batch, 5);
    std::vector<float> xs(static_cast<size_t>(batch * x_stride), 1e30f);
    for (int64_t b = 0; b < batch; ++b)
      std::memcpy(&xs[b * x_stride], &p.x[b * cols], cols * sizeof(float));
    std::vector<float> full(static_cast<size_t>(batch * rows));
    matmul_w8a32(p.view(), p.x.data(), cols, batch, full.data(), rows, 0, rows);
    std::vector<float> y(static_cast<size_t>(batch * y_stride), -7.0f);
    matmul_w8a32(p.view(), xs.data(), x_stride, batch, y.data(), y_stride, 5, 17);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t o = 0; o < y_stride; ++o) {
        const float got = y[b * y_stride + o];
        if (o >= 5 && o < 17) {
          EXPECT_EQ(got, full[b * rows + o]) << b << "," << o;
        } else {
          EXPECT_EQ(got, -7.0f) << "wrote outside the row range at " << b << "," << o;
        }
      }
    }
    // Batch 1 (its own row walk) on both variants: rows [5, 19) only, as computed in the batch.
    Quantized q = quantize(p.x.data(), batch, cols);
    std::vector<float> full8(static_cast<size_t>(batch * rows));
    matmul_w8a8(p.view(), Q8Activations{q.values.data(), q.scales.data(), batch, cols},
                full8.data(), rows, 0, rows);
    for (int variant = 0; variant < 2; ++variant) {
      std::vector<float> y1(static_cast<size_t>(y_stride), -7.0f);
      if (variant == 0) {
        matmul_w8a8(p.view(), Q8Activations{q.values.data(), q.scales.data(), 1, cols}, y1.data(),
                    y_stride, 5, 19);
      } else {
        matmul_w8a32(p.view(), xs.data(), x_stride, 1, y1.data(), y_stride, 5, 19);
      }
      for (int64_t o = 0; o < y_stride; ++o) {
        if (o >= 5 && o < 19) {
          EXPECT_EQ(y1[o], (variant == 0 ? full8 : full)[o])
              << "batch 1, variant " << variant << ", " << o;
        } else {
          EXPECT_EQ(y1[o], -7.0f) << "batch 1 wrote outside the row range at " << o;
        }
      }
    }
  });
}

// Batch invariance (issue 3 item 5): identical bits for a row computed alone, inside batches of
// 7 and 40, and under different output-row splits. Batch 1, decode-sized batches (<= 32) and
// larger ones walk the rows in different orders and tile shapes.
TEST(MatmulInt8, BatchAndRowSplitInvariant) {
  test::for_each_target([] {
    const int64_t rows = 45, cols = 288, batch = 40;
    Problem p = make_problem(rows, cols, batch, 99);
    Quantized q = quantize(p.x.data(), batch, cols);
    for (int variant = 0; variant < 2; ++variant) {
      SCOPED_TRACE(variant == 0 ? "w8a8" : "w8a32");
      // Runs rows [r0, r1) for activation rows [b0, b0 + nb) into y (layout [batch, rows]).
      auto run = [&](int64_t b0, int64_t nb, int64_t r0, int64_t r1, std::vector<float>& y) {
        if (variant == 0) {
          Q8Activations sub{q.values.data() + b0 * cols, q.scales.data() + b0 * cols / 32, nb,
                            cols};
          matmul_w8a8(p.view(), sub, y.data() + b0 * rows, rows, r0, r1);
        } else {
          matmul_w8a32(p.view(), p.x.data() + b0 * cols, cols, nb, y.data() + b0 * rows, rows, r0,
                       r1);
        }
      };
      std::vector<float> whole(static_cast<size_t>(batch * rows));
      run(0, batch, 0, rows, whole);
      std::vector<float> alone(whole.size()), of7(whole.size()), split(whole.size());
      for (int64_t b = 0; b < batch; ++b) run(b, 1, 0, rows, alone);
      for (int64_t b = 0; b < batch; b += 7) run(b, std::min<int64_t>(7, batch - b), 0, rows, of7);
      const int64_t cuts[] = {0, 1, 6, 13, 14, 31, 45};
      for (size_t i = 0; i + 1 < std::size(cuts); ++i) run(0, batch, cuts[i], cuts[i + 1], split);
      // Batch 1 walks its row range as several far-apart streams (ranges of 1..44 rows: parts
      // of 0..11 rows plus a remainder), so its splits take other paths than the whole range.
      std::vector<float> alone_split(whole.size());
      for (int64_t b = 0; b < batch; ++b) {
        for (size_t i = 0; i + 1 < std::size(cuts); ++i)
          run(b, 1, cuts[i], cuts[i + 1], alone_split);
      }
      EXPECT_EQ(0, std::memcmp(whole.data(), alone.data(), whole.size() * 4)) << "batch 1";
      EXPECT_EQ(0, std::memcmp(whole.data(), of7.data(), whole.size() * 4)) << "batch 7";
      EXPECT_EQ(0, std::memcmp(whole.data(), split.data(), whole.size() * 4)) << "row split";
      EXPECT_EQ(0, std::memcmp(whole.data(), alone_split.data(), whole.size() * 4))
          << "batch 1, row split";
    }
  });
}

}  // namespace
}  // namespace stoa::kernels
