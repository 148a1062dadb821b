// Engine arithmetic v2 does not depend on its environment: the same bits with the x86 denormal
// modes (MXCSR FTZ and DAZ) on or off, and no double, division, sqrt, fma or libm call in its
// compiled code (the object files' disassembly, so whatever the compiler made of the source).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/arith_v2.h"
#include "kernels/arith_v2_test_util.h"
#include "kernels/half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define STOA_HAVE_MXCSR 1
#endif

namespace stoa::kernels {
namespace {

// Inputs that reach every special path: denormals of both signs, FLT_MIN and its neighbours,
// zeros, the exp clamps, exact powers of two, infinities, NaN, and a random spread.
std::vector<float> edge_inputs() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          FLT_MIN,
                          -FLT_MIN,
                          FLT_MAX,
                          -FLT_MAX,
                          1.0f,
                          -1.0f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          -87.34f,
                          -87.5f,
                          88.72f,
                          88.73f,
                          2.0f,
                          0.5f,
                          3.0f,
                          std::ldexp(1.0f, 126),
                          std::ldexp(1.0f, -125),
                          std::ldexp(1.0f, -63),
                          std::ldexp(1.0f, -64),
                          std::ldexp(1.0f, -25)};
  for (uint32_t u : {0x00000001u, 0x007fffffu, 0x00400000u, 0x80000001u, 0x807fffffu, 0x00800001u})
    v.push_back(float_of(u));
  std::mt19937_64 rng(60);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t u = static_cast<uint32_t>(rng());
    // Half of them small (denormal or near the flush line), half anywhere.
    v.push_back(float_of(i % 2 ? u : (u & 0x81ffffffu)));
  }
  return v;
}

// Everything the primitives read, made before any mode switch (the test's own arithmetic would
// otherwise be flushed too and hand the primitives other inputs).
struct Inputs {
  std::vector<float> scalars, pairs, scaled, negated;
  std::vector<std::vector<float>> rows;
  // A dot product whose lane-0 partial sum, unflushed, would be a denormal (two normal products
  // of opposite sign, 1.5 and -1.25 x 2^-126) added later to a small normal one (2^-110): the
  // summand flush is what keeps it from depending on FTZ.
  std::vector<float> dot_a, dot_b;
  RandomQ8 q8;
};

Inputs make_inputs() {
  Inputs in;
  in.scalars = edge_inputs();
  const size_t n = in.scalars.size();
  for (size_t i = 0; i < n; ++i) {
    in.pairs.push_back(in.scalars[(i * 7 + 3) % n]);
    in.scaled.push_back(in.scalars[i] * 1e-37f);
    in.negated.push_back(-std::fabs(in.scalars[i]));
  }
  for (size_t at = 0; at + 100 <= n; at += 97)
    for (float scale : {1.0f, 1e-20f, 1e-38f}) {  // 1e-38 x is denormal for most x
      std::vector<float> r(100);
      for (size_t i = 0; i < r.size(); ++i) r[i] = std::fmod(in.scalars[at + i], 50.0f) * scale;
      in.rows.push_back(r);
    }
  in.dot_a.assign(64, 0.0f);
  in.dot_b.assign(64, 0.0f);
  in.dot_a[0] = std::ldexp(1.0f, -60);
  in.dot_b[0] = std::ldexp(1.5f, -66);
  in.dot_a[32] = -std::ldexp(1.0f, -60);
  in.dot_b[32] = std::ldexp(1.25f, -66);
  in.dot_a[1] = std::ldexp(1.0f, -55);
  in.dot_b[1] = std::ldexp(1.0f, -55);
  std::mt19937_64 rng(61);
  in.q8 = random_q8(rng, 9, 256, 4);
  for (size_t i = 0; i < in.q8.x.size(); i += 5) in.q8.x[i] = in.scalars[i % n] * 1e-30f;
  return in;
}

// Every primitive over every input (element-wise, pairs, rows, a small Q8 product) as bits.
std::vector<uint32_t> run_everything(const Inputs& in) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < in.scalars.size(); ++i) {
    const float x = in.scalars[i];
    for (float r :
         {v2::flush(x), v2::recip(x), v2::rsqrt(x), v2::exp(x), v2::sigmoid(x), v2::silu(x),
          v2::divide(x, in.pairs[i]), v2::exp(in.scaled[i]), v2::exp(in.negated[i])})
      out.push_back(bits_of(r));
  }
  for (const std::vector<float>& row : in.rows) {
    std::vector<float> r = row, normed(row.size());
    v2::rmsnorm_row(r.data(), nullptr, r.size(), 1e-6f, normed.data());
    v2::softmax_row(r.data(), r.size());
    for (size_t i = 0; i < r.size(); ++i) {
      out.push_back(bits_of(r[i]));
      out.push_back(bits_of(normed[i]));
    }
  }
  out.push_back(bits_of(v2::dot(in.dot_a.data(), in.dot_b.data(), in.dot_a.size())));
  // Attention over rows of the inputs (tiny ones included) as queries, keys and values.
  for (size_t r = 0; r + 3 < in.rows.size(); r += 4) {
    const std::vector<float>& q = in.rows[r];
    const size_t head_dim = 20, n_keys = q.size() / head_dim;
    std::vector<float> scores(n_keys), head(head_dim);
    v2::attention_head(q.data(), in.rows[r + 1].data(), head_dim, in.rows[r + 2].data(), head_dim,
                       n_keys, head_dim, 0.125f, scores.data(), head.data());
    for (float v : scores) out.push_back(bits_of(v));
    for (float v : head) out.push_back(bits_of(v));
  }
  // The rest of a pass over the rows (tiny ones included): RoPE, a short conv, MoE mixing,
  // residual adds, SwiGLU, router weights.
  for (size_t r = 0; r + 3 < in.rows.size(); r += 3) {
    std::vector<float> head = in.rows[r],
                       state(in.rows[r + 1].begin(), in.rows[r + 1].begin() + 40);
    const std::vector<float>& other = in.rows[r + 2];
    v2::rope_apply(head.data(), 40, other.data(), other.data() + 20);
    std::vector<float> conv(20), mixed(100, 0.0f), swiglu(100);
    v2::short_conv_step(other.data(), 20, 3, state.data(), head.data(), conv.data());
    v2::moe_mix(other[0], head.data(), mixed.data(), 100);
    v2::moe_mix(other[1], in.rows[r + 1].data(), mixed.data(), 100);
    v2::silu_mul(head.data(), other.data(), swiglu.data(), 100);
    const int32_t chosen[] = {0, 5, 9};
    float weights[3];
    v2::moe_weights(other.data(), chosen, 3, true, 1.5f, weights);
    for (const std::vector<float>* v : {&head, &state, &conv, &mixed, &swiglu})
      for (float x : *v) out.push_back(bits_of(x));
    for (float x : weights) out.push_back(bits_of(x));
    for (size_t i = 0; i < 100; ++i) out.push_back(bits_of(v2::add(head[i], other[i])));
  }
  RandomQ8 m = in.q8;
  v2::quantize_q8(m.x.data(), m.cols, m.acts());
  std::vector<float> y(m.batch * m.rows);
  v2::matvec_q8(m.weights(), m.acts(), y.data(), m.rows);
  for (float v : y) out.push_back(bits_of(v));
  for (float v : m.xd) out.push_back(bits_of(v));
  for (int8_t v : m.xq) out.push_back(static_cast<uint32_t>(v));
  return out;
}

TEST(ArithV2Env, SameBitsWithFlushToZeroOnAndOff) {
  const Inputs inputs = make_inputs();
  const std::vector<uint32_t> plain = run_everything(inputs);
#ifdef STOA_HAVE_MXCSR
  const unsigned int saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);  // FTZ (bit 15) and DAZ (bit 6)
  // The modes really are on: a denormal operand reads as zero (DAZ), a denormal result is
  // flushed (FTZ). Volatile, so that the compiler computes them here, under the mode.
  volatile float denormal = float_of(0x00000010u), smallest_normal = FLT_MIN;
  const float doubled = denormal * 2.0f, halved = smallest_normal * 0.5f;
  const bool daz_on = bits_of(doubled) == 0u && bits_of(halved) == 0u;
  const std::vector<uint32_t> flushed = run_everything(inputs);
  _mm_setcsr(saved);
  ASSERT_TRUE(daz_on);
  ASSERT_EQ(plain.size(), flushed.size());
  size_t differing = 0;
  for (size_t i = 0; i < plain.size(); ++i) differing += plain[i] != flushed[i];
  EXPECT_EQ(differing, 0u) << "of " << plain.size() << " results";
#else
  // No MXCSR here (e.g. aarch64): the run still checks that the paths execute; FPCR.FZ is not
  // switched (the x86 run is the one CI checks).
  EXPECT_FALSE(plain.empty());
#endif
}

// The compiled primitives: no double-precision instruction, no division or square root
// instruction, no fused multiply-add, no call into libm. Scans the disassembly of the
// arith_v2 object files (their paths come from CMake).
TEST(ArithV2Env, CompiledCodeUsesOnlyTheSpecsOperations) {
  const std::string objects = STOA_ARITH_V2_OBJECTS;
  ASSERT_FALSE(objects.empty());
  std::stringstream list(objects);
  std::string path;
  const std::regex forbidden(
      // x86: double-precision arithmetic and conversions, divisions, square roots, FMA.
      R"(\s(v?(add|sub|mul|div|sqrt|min|max)[sp]d|v?cvt\w*(sd|pd)\w*|v?div[sp]s|v?sqrt[sp]s|)"
      R"(v?rcp\w+|v?rsqrt\w+|vfn?m(add|sub)\w*)\s)"
      // aarch64: divisions, square roots, fused multiply-adds, conversions to/from double.
      R"(|\s(fdiv|fsqrt|frecpe|frsqrte|fmadd|fmsub|fnmadd|fnmsub|fmla|fmls)\s)"
      // Calls into libm.
      R"(|call.*<(exp|expf|log|sqrt|sqrtf|fma|fmaf|pow|powf)(@plt)?>)");
  int scanned = 0;
  while (std::getline(list, path, '|')) {
    const std::string command = "objdump -d --no-show-raw-insn '" + path + "' 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr) << command;
    char line[512];
    int lines = 0;
    while (std::fgets(line, sizeof line, pipe) != nullptr) {
      ++lines;
      EXPECT_FALSE(std::regex_search(line, forbidden)) << path << ": " << line;
    }
    EXPECT_EQ(pclose(pipe), 0) << command;
    EXPECT_GT(lines, 50) << path;  // really disassembled
    ++scanned;
  }
  EXPECT_EQ(scanned, 4);  // arith_v2.cpp, _rows.cpp, _attention.cpp, _ops.cpp
}

}  // namespace
}  // namespace stoa::kernels
