#include "gpu/vulkan/self_test.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include "core/rng.h"
#include "gpu/vulkan/arith_check.h"
#include "gpu/vulkan/q8_matvec.h"
#include "gpu/vulkan/q8_quantize.h"
#include "kernels/arith_v2.h"
#include "kernels/half.h"

namespace stoa::gpu::vulkan {
namespace {

using kernels::bits_of;
using kernels::float_of;

// Fixed inputs: the special classes the spec names, then bit patterns drawn by splitmix64 from a
// fixed seed (the same on every machine), half of them forced small (denormal or near FLT_MIN).
std::vector<float> element_inputs() {
  std::vector<float> v;
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x80800000u,
                     0x00800001u, 0x3f800000u, 0xbf800000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u,
                     0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x42b170a4u, 0x42b170a5u,
                     0xc2af0000u, 0xc2aeae14u, 0x33000000u, 0xb3000000u, 0x7e800000u, 0x7f000000u})
    v.push_back(float_of(u));
  uint64_t state = 0x5354'4f41'7632ull;  // "STOAv2"
  for (int i = 0; i < (1 << 16); ++i) {
    const uint32_t u = static_cast<uint32_t>(splitmix64(&state));
    v.push_back(float_of(i % 2 ? u : (u & 0x81ffffffu)));
  }
  return v;
}

// The first differing position of two bit vectors, or -1.
long first_difference(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want) {
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    if (got[i] != want[i]) return static_cast<long>(i);
  return got.size() == want.size() ? -1 : static_cast<long>(std::min(got.size(), want.size()));
}

std::string hex(uint32_t u) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", u);
  return buf;
}

// Empty when equal, else the first difference in words.
std::string compare(const char* what, const std::vector<uint32_t>& got,
                    const std::vector<uint32_t>& want, const std::vector<float>* inputs) {
  const long i = first_difference(got, want);
  if (i < 0) return {};
  std::string line = std::string(what) + " differs at " + std::to_string(i);
  if (inputs != nullptr && static_cast<size_t>(i) < inputs->size())
    line += " (input " + hex(bits_of((*inputs)[static_cast<size_t>(i)])) + ")";
  if (static_cast<size_t>(i) < got.size() && static_cast<size_t>(i) < want.size())
    line += ": device " + hex(got[static_cast<size_t>(i)]) + ", host " +
            hex(want[static_cast<size_t>(i)]);
  return line;
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bits_of(v[i]);
  return out;
}

std::string check_elementwise(Context& ctx) {
  V2Elementwise ew(ctx);
  const std::vector<float> a = element_inputs();
  std::vector<float> b(a.size());
  for (size_t i = 0; i < a.size(); ++i) b[i] = a[(i * 7919 + 13) % a.size()];
  const char* names[] = {"flush", "recip", "divide", "rsqrt", "exp", "sigmoid", "silu"};
  for (uint32_t o = 0; o <= static_cast<uint32_t>(V2Op::kSilu); ++o) {
    const V2Op op = static_cast<V2Op>(o);
    std::vector<uint32_t> want(a.size());
    for (size_t i = 0; i < a.size(); ++i) want[i] = bits_of(v2_on_host(op, a[i], b[i]));
    const std::string diff = compare(names[o], ew.run(op, a, b), want, &a);
    if (!diff.empty()) return diff;
  }
  return {};
}

std::string check_rows(Context& ctx) {
  V2Rows rows(ctx);
  uint64_t state = 0x726f7773ull;  // "rows"
  for (uint32_t n : {1u, 33u, 1000u}) {
    std::vector<float> x(static_cast<size_t>(n) * 4), weight(n);
    for (float& v : x)
      v = static_cast<float>(static_cast<int32_t>(splitmix64(&state) >> 40)) * 0x1p-20f;
    for (float& v : weight) v = 1.0f + static_cast<float>(splitmix64(&state) >> 54) * 0x1p-12f;
    std::vector<float> want_softmax = x, want_norm(x.size());
    for (uint32_t r = 0; r < 4; ++r) {
      kernels::v2::softmax_row(want_softmax.data() + r * n, n);
      kernels::v2::rmsnorm_row(x.data() + r * n, weight.data(), n, 1e-6f, want_norm.data() + r * n);
    }
    std::string diff = compare("softmax_row", rows.softmax(x, n), bits(want_softmax), &x);
    if (diff.empty())
      diff = compare("rmsnorm_row", rows.rmsnorm(x, weight, n, 1e-6f), bits(want_norm), &x);
    if (!diff.empty()) return diff + " (n = " + std::to_string(n) + ")";
  }
  return {};
}

std::string check_attention(Context& ctx) {
  V2Attention attention(ctx);
  uint64_t state = 0x6174746eull;  // "attn"
  constexpr uint32_t kHead = 64, kKeys = 45, kQueries = 3;
  std::vector<float> q(kQueries * kHead), k(kKeys * kHead), v(kKeys * kHead);
  for (auto* m : {&q, &k, &v})
    for (float& x : *m)
      x = static_cast<float>(static_cast<int32_t>(splitmix64(&state) >> 40)) * 0x1p-23f;
  const float scale = 0.125f;
  const V2Attention::Result got = attention.run(q, k, v, kKeys, kHead, kHead, kHead, scale);
  std::vector<float> probabilities(kQueries * kKeys), out(kQueries * kHead);
  for (uint32_t r = 0; r < kQueries; ++r)
    kernels::v2::attention_head(q.data() + r * kHead, k.data(), kHead, v.data(), kHead, kKeys,
                                kHead, scale, probabilities.data() + r * kKeys,
                                out.data() + r * kHead);
  std::string diff =
      compare("attention's probabilities", got.probabilities, bits(probabilities), nullptr);
  return diff.empty() ? compare("attention's outputs", got.out, bits(out), nullptr) : diff;
}

std::string check_q8(Context& ctx) {
  constexpr int64_t kRows = 48, kCols = 512, kBatch = 3;
  uint64_t state = 0x7138ull;  // "q8"
  std::vector<int8_t> wq(kRows * kCols);
  std::vector<uint16_t> ws(kRows * kCols / 32);
  std::vector<float> x(kBatch * kCols);
  for (int8_t& v : wq) v = static_cast<int8_t>(splitmix64(&state));
  for (uint16_t& s : ws)  // scales 2^-14 .. 2^-4, some f16 subnormals
    s = static_cast<uint16_t>(
        (splitmix64(&state) % 11 == 0) ? 0x0100u : 0x0400u + splitmix64(&state) % 0x2800u);
  for (float& v : x)
    v = static_cast<float>(static_cast<int32_t>(splitmix64(&state) >> 40)) * 0x1p-22f;
  const kernels::Int8Weights w{wq.data(), ws.data(), kRows, kCols};
  std::vector<int8_t> hq(x.size()), dq(x.size());
  std::vector<float> hd(x.size() / 32), dd(x.size() / 32), hy(kBatch * kRows), dy(kBatch * kRows);
  const kernels::Q8Activations host_acts{hq.data(), hd.data(), kBatch, kCols, nullptr};
  const kernels::Q8Activations dev_acts{dq.data(), dd.data(), kBatch, kCols, nullptr};
  kernels::v2::quantize_q8(x.data(), kCols, host_acts);
  kernels::v2::matvec_q8(w, host_acts, hy.data(), kRows);
  Q8Quantize quantize(ctx);
  Q8Matvec matvec(ctx);
  quantize.run(x.data(), kCols, dev_acts);
  if (hq != dq) return "quantize_q8's values differ";
  std::string diff = compare("quantize_q8's scales", bits(dd), bits(hd), nullptr);
  if (!diff.empty()) return diff;
  matvec.run(matvec.upload(w), dev_acts, dy.data(), kRows);
  return compare("matvec_q8", bits(dy), bits(hy), nullptr);
}

}  // namespace

SelfTestResult run_v2_self_test(Context& ctx) {
  SelfTestResult result;
  const std::string device = ctx.info().name;
  try {
    for (auto check : {check_elementwise, check_rows, check_attention, check_q8}) {
      const std::string diff = check(ctx);
      if (!diff.empty()) {
        result.report = "the Vulkan device " + device +
                        " does not compute engine arithmetic v2 as the CPU does: " + diff;
        return result;
      }
    }
  } catch (const std::exception& e) {
    result.report = "the Vulkan device " + device + " failed its self-test: " + e.what();
    return result;
  }
  result.passed = true;
  result.report = "the Vulkan device " + device +
                  " computes engine arithmetic v2 bit for bit as the CPU does (7 primitives on " +
                  std::to_string(element_inputs().size()) +
                  " inputs each, softmax and RMSNorm rows, attention, quantise + matvec)";
  return result;
}

}  // namespace stoa::gpu::vulkan
