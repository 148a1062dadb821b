// The packed W8A8 kernel (kernels/matmul_int8_packed.h), and the row-major grid kernel, against
// their one formula, written out here independently of the kernels: per output, acc = acc +
// float(exact block sum) * (d_w * d_x) over the blocks in order, the product rounded before the
// add (engine arithmetic v2, docs/design/arithmetic.md) — bit for bit, on every target, batch
// size and row split.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/int8_grid.h"
#include "kernels/half.h"
#include "kernels/matmul_int8.h"
#include "kernels/matmul_int8_packed.h"
#include "kernels/random_weights.h"
#include "kernels/target_loop.h"

namespace stoa::kernels {
namespace {

struct Problem {
  Int8Matrix w;
  std::vector<int8_t> xq;
  std::vector<float> xd;
  std::vector<int32_t> sums;
  int64_t batch = 0;
  Int8Weights view() const { return {w.values.data(), w.scales.data(), w.rows, w.cols}; }
  Q8Activations acts(int64_t b0, int64_t nb) {
    const int64_t groups = w.cols / 32;
    return {xq.data() + b0 * w.cols, xd.data() + b0 * groups, nb, w.cols,
            sums.data() + b0 * groups};
  }
};

Problem make_problem(int64_t rows, int64_t cols, int64_t batch, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.w = test::random_int8_weights(rows, cols, rng);
  p.batch = batch;
  const std::vector<float> x = test::random_activations(batch, cols, rng);
  p.xq.resize(x.size());
  p.xd.resize(x.size() / 32);
  p.sums.assign(x.size() / 32, -12345);
  quantize_activations_q8(x.data(), cols, p.acts(0, batch));
  return p;
}

// The formula, from the row-major grid.
std::vector<float> formula(const Problem& p) {
  const int64_t rows = p.w.rows, cols = p.w.cols, groups = cols / 32;
  std::vector<float> y(static_cast<size_t>(p.batch * rows));
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        int32_t isum = 0;
        for (int64_t i = g * 32; i < (g + 1) * 32; ++i)
          isum += int32_t{p.w.values[r * cols + i]} * p.xq[b * cols + i];
        const float scale = f16_bits_to_f32(p.w.scales[r * groups + g]) * p.xd[b * groups + g];
        acc = acc + static_cast<float>(isum) * scale;  // never fused
      }
      y[b * rows + r] = acc;
    }
  }
  return y;
}

TEST(QuantizeQ8, BlockSumsAreTheValuesSums) {
  Problem p = make_problem(1, 288, 5, 3);
  for (size_t blk = 0; blk < p.sums.size(); ++blk) {
    int32_t want = 0;
    for (size_t i = 0; i < 32; ++i) want += p.xq[blk * 32 + i];
    EXPECT_EQ(p.sums[blk], want) << blk;
  }
}

TEST(PackedW8A8, BitExactAgainstTheFormula) {
  test::for_each_target([] {
    for (int64_t rows : {1, 15, 16, 17, 45, 100}) {
      for (int64_t cols : {32, 96, 288, 800}) {
        for (int64_t batch : {1, 2, 5, 6, 7, 13, 33, 70}) {
          Problem p =
              make_problem(rows, cols, batch, static_cast<uint32_t>(rows * 7 + cols + batch));
          const PackedInt8 packed = PackedInt8::pack(p.view());
          std::vector<float> y(static_cast<size_t>(batch * rows), NAN);
          matmul_w8a8_packed(packed, p.acts(0, batch), y.data(), rows, 0, rows);
          const std::vector<float> want = formula(p);
          SCOPED_TRACE(testing::Message() << rows << "x" << cols << " batch " << batch);
          ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4));
        }
      }
    }
  });
}

// The row-major grid kernel computes the same formula on every target (issue 19: one
// arithmetic whatever the target and layout), through every tile shape of its walk.
TEST(GridW8A8, BitExactAgainstTheFormula) {
  test::for_each_target([] {
    for (int64_t rows : {1, 3, 8, 13, 45}) {
      for (int64_t cols : {32, 96, 288, 800}) {
        for (int64_t batch : {1, 2, 3, 5, 9, 33, 40}) {
          Problem p =
              make_problem(rows, cols, batch, static_cast<uint32_t>(rows * 5 + cols + batch));
          std::vector<float> y(static_cast<size_t>(batch * rows), NAN);
          matmul_w8a8(p.view(), p.acts(0, batch), y.data(), rows, 0, rows);
          const std::vector<float> want = formula(p);
          SCOPED_TRACE(testing::Message() << rows << "x" << cols << " batch " << batch);
          ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4));
        }
      }
    }
  });
}

// Extreme grid values: -128 weights against +-127 activations (the +128 bias of the unsigned
// operand must not saturate or wrap).
TEST(PackedW8A8, ExtremeValuesAreExact) {
  test::for_each_target([] {
    Problem p = make_problem(19, 96, 3, 23);
    for (size_t i = 0; i < p.w.values.size(); ++i)
      p.w.values[i] = static_cast<int8_t>(i % 3 == 0 ? -128 : (i % 3 == 1 ? 127 : -127));
    for (size_t i = 0; i < p.xq.size(); ++i) p.xq[i] = (i % 5 == 0) ? -127 : 127;
    for (size_t blk = 0; blk < p.sums.size(); ++blk) {
      p.sums[blk] = 0;
      for (size_t i = 0; i < 32; ++i) p.sums[blk] += p.xq[blk * 32 + i];
    }
    const PackedInt8 packed = PackedInt8::pack(p.view());
    std::vector<float> y(3 * 19);
    matmul_w8a8_packed(packed, p.acts(0, 3), y.data(), 19, 0, 19);
    const std::vector<float> want = formula(p);
    EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4));
    // Batch 1 takes its own walk (panels far apart).
    for (int64_t b = 0; b < 3; ++b) {
      std::vector<float> y1(19);
      matmul_w8a8_packed(packed, p.acts(b, 1), y1.data(), 19, 0, 19);
      EXPECT_EQ(0, std::memcmp(y1.data(), want.data() + b * 19, 19 * 4)) << "batch 1, row " << b;
    }
  });
}

// unpack_row returns every row's values and scales bit for bit (rows in a partial last panel
// too, extreme values included), and refuses a row outside the matrix.
TEST(PackedW8A8, UnpackRowIsThePackedRow) {
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{37, 96}, {16, 32}, {5, 256}}) {
    Problem p = make_problem(rows, cols, 0, 31);
    p.w.values[0] = -128;
    p.w.values[p.w.values.size() - 1] = 127;
    const PackedInt8 packed = PackedInt8::pack(p.view());
    std::vector<int8_t> values(static_cast<size_t>(cols));
    std::vector<uint16_t> scales(static_cast<size_t>(cols / 32));
    for (int64_t r = 0; r < rows; ++r) {
      packed.unpack_row(r, values.data(), scales.data());
      EXPECT_EQ(0, std::memcmp(values.data(), p.w.row(r), values.size())) << rows << " row " << r;
      EXPECT_EQ(0, std::memcmp(scales.data(), p.w.scales.data() + r * (cols / 32),
                               scales.size() * sizeof(uint16_t)))
          << rows << " row " << r;
    }
    EXPECT_THROW(packed.unpack_row(rows, values.data(), scales.data()), std::invalid_argument);
    EXPECT_THROW(packed.unpack_row(-1, values.data(), scales.data()), std::invalid_argument);
  }
}

// unpack_rows gives the same bits as unpack_row for any row range (whole panels, partial ones at
// either end, an empty range) and refuses a range outside the matrix.
TEST(PackedW8A8, UnpackRowsIsEveryUnpackedRow) {
  for (const auto& [rows, cols] :
       {std::pair<int64_t, int64_t>{37, 96}, {16, 32}, {5, 256}, {64, 2048}}) {
    Problem p = make_problem(rows, cols, 0, 37);
    p.w.values[0] = -128;
    p.w.values[p.w.values.size() - 1] = 127;
    const PackedInt8 packed = PackedInt8::pack(p.view());
    const int64_t per_row = cols / 32;
    for (const auto& [r0, r1] : {std::pair<int64_t, int64_t>{0, rows},
                                 {1, rows},
                                 {3, 4},
                                 {0, std::min<int64_t>(rows, 17)},
                                 {rows / 2, rows},
                                 {2, 2}}) {
      std::vector<int8_t> values(static_cast<size_t>((r1 - r0) * cols));
      std::vector<uint16_t> scales(static_cast<size_t>((r1 - r0) * per_row));
      packed.unpack_rows(r0, r1, values.data(), scales.data());
      EXPECT_EQ(0, std::memcmp(values.data(), p.w.values.data() + r0 * cols, values.size()))
          << rows << "x" << cols << " rows [" << r0 << ", " << r1 << ")";
      EXPECT_EQ(0, std::memcmp(scales.data(), p.w.scales.data() + r0 * per_row,
                               scales.size() * sizeof(uint16_t)))
          << rows << "x" << cols << " rows [" << r0 << ", " << r1 << ")";
    }
    std::vector<int8_t> values(static_cast<size_t>(rows * cols));
    std::vector<uint16_t> scales(static_cast<size_t>(rows * per_row));
    EXPECT_THROW(packed.unpack_rows(0, rows + 1, values.data(), scales.data()),
                 std::invalid_argument);
    EXPECT_THROW(packed.unpack_rows(-1, 2, values.data(), scales.data()), std::invalid_argument);
  }
}

// exchange_values writes a scattered set of points (more than one prefetch batch) and hands
// back exactly the values it overwrote; writing those back restores every byte.
TEST(PackedW8A8, ExchangeValuesWritesThePointsAndReturnsTheOldOnes) {
  const int64_t rows = 37, cols = 96;
  Problem p = make_problem(rows, cols, 0, 41);
  PackedInt8 packed = PackedInt8::pack(p.view());
  std::vector<uint64_t> positions;
  std::vector<int8_t> values;
  for (uint64_t at = 3; at < static_cast<uint64_t>(rows * cols); at += 7) {
    positions.push_back(at);
    values.push_back(static_cast<int8_t>(static_cast<int>(at % 251) - 125));
  }
  ASSERT_GT(positions.size(), 64u);
  std::vector<int8_t> old(positions.size());
  packed.exchange_values(positions, values.data(), old.data());
  Int8Matrix want = p.w;
  for (size_t i = 0; i < positions.size(); ++i) {
    EXPECT_EQ(old[i], p.w.values[positions[i]]) << i;
    want.values[positions[i]] = values[i];
  }
  std::vector<int8_t> got(static_cast<size_t>(rows * cols));
  std::vector<uint16_t> scales(static_cast<size_t>(rows * cols / 32));
  packed.unpack_rows(0, rows, got.data(), scales.data());
  EXPECT_EQ(got, want.values);
  packed.exchange_values(positions, old.data(), nullptr);
  packed.unpack_rows(0, rows, got.data(), scales.data());
  EXPECT_EQ(got, p.w.values);
  EXPECT_EQ(scales, p.w.scales);
}

// Batch invariance: a row's bits alone, in batches of 7 and 40, under row splits that cut
// panels (each part writes only its rows), and batch 1 under the same splits.
TEST(PackedW8A8, BatchAndRowSplitInvariantAndWritesOnlyItsRows) {
  test::for_each_target([] {
    const int64_t rows = 45, cols = 288, batch = 40, y_stride = 50;
    Problem p = make_problem(rows, cols, batch, 99);
    const PackedInt8 packed = PackedInt8::pack(p.view());
    auto run = [&](int64_t b0, int64_t nb, int64_t r0, int64_t r1, std::vector<float>& y) {
      matmul_w8a8_packed(packed, p.acts(b0, nb), y.data() + b0 * y_stride, y_stride, r0, r1);
    };
    std::vector<float> whole(static_cast<size_t>(batch * y_stride), -7.0f);
    run(0, batch, 0, rows, whole);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t o = rows; o < y_stride; ++o)
        ASSERT_EQ(whole[b * y_stride + o], -7.0f) << "wrote past the rows at " << b << "," << o;
    std::vector<float> alone(whole.size(), -7.0f), of7(whole.size(), -7.0f);
    std::vector<float> split(whole.size(), -7.0f), alone_split(whole.size(), -7.0f);
    for (int64_t b = 0; b < batch; ++b) run(b, 1, 0, rows, alone);
    for (int64_t b = 0; b < batch; b += 7) run(b, std::min<int64_t>(7, batch - b), 0, rows, of7);
    const int64_t cuts[] = {0, 1, 6, 13, 16, 17, 31, 45};
    for (size_t i = 0; i + 1 < std::size(cuts); ++i) run(0, batch, cuts[i], cuts[i + 1], split);
    for (int64_t b = 0; b < batch; ++b)
      for (size_t i = 0; i + 1 < std::size(cuts); ++i) run(b, 1, cuts[i], cuts[i + 1], alone_split);
    EXPECT_EQ(0, std::memcmp(whole.data(), alone.data(), whole.size() * 4)) << "batch 1";
    EXPECT_EQ(0, std::memcmp(whole.data(), of7.data(), whole.size() * 4)) << "batch 7";
    EXPECT_EQ(0, std::memcmp(whole.data(), split.data(), whole.size() * 4)) << "row split";
    EXPECT_EQ(0, std::memcmp(whole.data(), alone_split.data(), whole.size() * 4))
        << "batch 1, row split";
    // A part of the rows writes only that part.
    std::vector<float> part(whole.size(), -7.0f);
    run(0, batch, 13, 31, part);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t o = 0; o < y_stride; ++o) {
        const float got = part[b * y_stride + o];
        if (o >= 13 && o < 31)
          EXPECT_EQ(got, whole[b * y_stride + o]) << b << "," << o;
        else
          EXPECT_EQ(got, -7.0f) << "wrote outside [13, 31) at " << b << "," << o;
      }
  });
}

}  // namespace
}  // namespace stoa::kernels
