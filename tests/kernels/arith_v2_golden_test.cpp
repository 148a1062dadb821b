// Golden digest of engine arithmetic v2's reference (kernels/arith_v2.h): fixed inputs, made by
// integer arithmetic and exact conversions, through every primitive, the bits hashed. The value
// was recorded on x86-64 with GCC 12 (2026-12-06); every compiler and machine must reproduce it
// (the reference is the formula a GPU is checked against, so it may not drift by a bit between
// the CPUs that check). A change of formula changes it on purpose, with the spec.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/arith_v2.h"
#include "kernels/half.h"
#include "support/bit_digest.h"

namespace stoa::kernels {
namespace {

struct Digest : test::BitDigest {
  void add_float(float f) { add(test::bits(f), 4); }
  void add_all(const std::vector<float>& v) {
    for (float f : v) add_float(f);
  }
};

// n values: multiples of 2^-shift of 24-bit signed integers (exact floats), from an LCG.
std::vector<float> values(uint64_t* state, size_t n, int shift) {
  std::vector<float> v(n);
  for (float& x : v) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    const auto k = static_cast<int32_t>(static_cast<int64_t>(*state >> 40) - (int64_t{1} << 23));
    x = static_cast<float>(k) * (shift >= 0 ? 1.0f / static_cast<float>(1u << shift)  // exact
                                            : static_cast<float>(1u << -shift));
  }
  return v;
}

TEST(ArithV2Golden, Digest) {
  constexpr uint64_t kGolden = 0x3445f8d1e9c7c030ull;
  Digest d;
  uint64_t state = 0x5354'4f41'7632ull;
  // Element-wise: every bit pattern class, by a fixed walk over the 32-bit space.
  for (uint32_t i = 0; i < 50000; ++i) {
    const float x = float_of(i * 85899u + (i >> 3));  // covers NaNs, infinities, denormals
    const float y = float_of((i * 2654435761u) ^ 0x5bd1e995u);
    for (float r : {v2::flush(x), v2::recip(x), v2::divide(x, y), v2::rsqrt(x), v2::exp(x),
                    v2::sigmoid(x), v2::silu(x), v2::flush_summand(x), v2::add(x, y)})
      d.add_float(r);
  }
  const std::vector<float> moderate = values(&state, 8192, 20);  // |x| < 8
  for (float x : moderate) {
    d.add_float(v2::exp(x * 8.0f));
    d.add_float(v2::silu(x));
  }
  // Rows, attention, the pass ops, quantisation and the matvec.
  for (size_t n : {1, 33, 1000}) {
    std::vector<float> row(moderate.begin(), moderate.begin() + static_cast<ptrdiff_t>(n));
    std::vector<float> normed(n);
    v2::rmsnorm_row(row.data(), moderate.data() + 4000, n, 1e-6f, normed.data());
    v2::softmax_row(row.data(), n);
    d.add_all(row);
    d.add_all(normed);
  }
  {
    const size_t head = 64, keys = 45;
    std::vector<float> scores(keys), out(head);
    v2::attention_head(moderate.data(), moderate.data() + 100, head, moderate.data() + 3000, head,
                       keys, head, 0.125f, scores.data(), out.data());
    d.add_all(scores);
    d.add_all(out);
    std::vector<float> rope(moderate.begin(), moderate.begin() + 128), conv(64), mixed(64, 0.0f),
        state_window(moderate.begin() + 500, moderate.begin() + 628), swiglu(64);
    v2::rope_apply(rope.data(), 128, moderate.data() + 200, moderate.data() + 300);
    v2::short_conv_step(moderate.data() + 700, 64, 3, state_window.data(), moderate.data() + 900,
                        conv.data());
    v2::moe_mix(0.375f, moderate.data() + 1000, mixed.data(), 64);
    v2::moe_mix(-1.25f, moderate.data() + 1100, mixed.data(), 64);
    v2::silu_mul(moderate.data() + 1200, moderate.data() + 1300, swiglu.data(), 64);
    const int32_t chosen[] = {2, 7, 11, 3};
    float weights[4];
    v2::moe_weights(moderate.data(), chosen, 4, true, 2.5f, weights);
    for (const std::vector<float>* v : {&rope, &conv, &mixed, &state_window, &swiglu})
      d.add_all(*v);
    for (float w : weights) d.add_float(w);
  }
  {
    const int64_t rows = 24, cols = 256, batch = 2;
    std::vector<int8_t> wq(rows * cols), xq(batch * cols);
    std::vector<uint16_t> ws(rows * cols / 32);
    for (size_t i = 0; i < wq.size(); ++i) wq[i] = static_cast<int8_t>(i * 37 + (i >> 5));
    for (size_t i = 0; i < ws.size(); ++i) ws[i] = static_cast<uint16_t>(0x1000u + i * 97u);
    std::vector<float> xd(batch * cols / 32), y(batch * rows);
    std::vector<int32_t> sums(xd.size());
    const Q8Activations acts{xq.data(), xd.data(), batch, cols, sums.data()};
    v2::quantize_q8(moderate.data(), cols, acts);
    v2::matvec_q8({wq.data(), ws.data(), rows, cols}, acts, y.data(), rows);
    for (int8_t q : xq) d.add(static_cast<uint8_t>(q), 1);
    for (int32_t s : sums) d.add(static_cast<uint32_t>(s), 4);
    d.add_all(xd);
    d.add_all(y);
  }
  EXPECT_EQ(d.h, kGolden) << std::hex << "digest 0x" << d.h;
}

}  // namespace
}  // namespace stoa::kernels
