// The sampler's arithmetic is one function on every machine (issue 19: a validator on another
// machine recomputes a rollout's log-probs and draws bit for bit). Here: a plain scalar
// transcription of the documented arithmetic (engine/sampler.h) against the production path on
// random logits, on every SIMD target of this CPU; and a golden digest of log-probs and drawn
// tokens on fixed logits, recorded on x86-64, that every machine must reproduce (the 64-bit ARM
// build runs this binary under qemu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "engine/sampler.h"
#include "kernels/fixed_math.h"
#include "kernels/targets.h"
#include "support/bit_digest.h"

namespace stoa::engine {
namespace {

using stoa::test::bits;

struct Digest : stoa::test::BitDigest {
  using BitDigest::add;
  void add(const TokenLogprob& t) {
    add(static_cast<uint32_t>(t.token), 4);
    add(bits(t.logprob), 4);
  }
};

// ln Σ e^z[ids[k]] as documented: max, then fixed_exp(z - max) into partial sum k mod 32, the
// partial sums reduced by s[j] += s[j + w] (w = 16 .. 1), then max + fixed_log(sum).
double reference_lse(const std::vector<double>& z, const std::vector<int32_t>& ids) {
  double m = -std::numeric_limits<double>::infinity();
  for (int32_t id : ids) m = std::max(m, z[static_cast<size_t>(id)]);
  double s[32] = {};
  for (size_t k = 0; k < ids.size(); ++k)
    s[k % 32] += kernels::fixed_exp(z[static_cast<size_t>(ids[k])] - m);
  for (size_t w = 16; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) s[j] += s[j + w];
  return m + kernels::fixed_log(s[0]);
}

// sampling_distribution, written plainly: one value at a time, full sorts.
std::vector<TokenLogprob> reference_distribution(std::span<const float> logits,
                                                 const SamplingParams& p) {
  const size_t V = logits.size();
  if (p.temperature == 0) {
    size_t best = 0;
    for (size_t i = 1; i < V; ++i)
      if (logits[i] > logits[best]) best = i;
    return {TokenLogprob{static_cast<int32_t>(best), 0.0f}};
  }
  std::vector<double> z(V);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < V; ++i) {
    z[i] = static_cast<double>(logits[i]) / p.temperature;
    if (!std::isinf(z[i])) ids.push_back(static_cast<int32_t>(i));
  }
  const auto desc = [&](int32_t a, int32_t b) {
    const double za = z[static_cast<size_t>(a)], zb = z[static_cast<size_t>(b)];
    return za != zb ? za > zb : a < b;
  };
  if (p.top_k > 0 && p.top_k < static_cast<int64_t>(ids.size())) {
    std::sort(ids.begin(), ids.end(), desc);
    ids.resize(static_cast<size_t>(p.top_k));
  }
  if (p.top_p < 1) {
    // Normalised over the support in its order before the cut (id order, or descending after
    // top-k), then cut in descending order.
    const double lse = reference_lse(z, ids);
    std::sort(ids.begin(), ids.end(), desc);
    double mass = 0;
    size_t keep = ids.size();
    for (size_t k = 0; k < ids.size(); ++k) {
      mass += kernels::fixed_exp(z[static_cast<size_t>(ids[k])] - lse);
      if (mass >= p.top_p) {
        keep = k + 1;
        break;
      }
    }
    ids.resize(keep);
  }
  const double lse = reference_lse(z, ids);
  std::vector<TokenLogprob> out;
  for (int32_t id : ids) out.push_back({id, static_cast<float>(z[static_cast<size_t>(id)] - lse)});
  return out;
}

size_t reference_pick(const std::vector<TokenLogprob>& dist, double u) {
  double cum = 0;
  for (size_t i = 0; i < dist.size(); ++i) {
    cum += kernels::fixed_exp(static_cast<double>(dist[i].logprob));
    if (u < cum) return i;
  }
  return dist.size() - 1;
}

std::vector<SamplingParams> params_grid() {
  std::vector<SamplingParams> out;
  for (double t : {1.0, 0.7, 1.3, 0.25, 0.0})
    for (int64_t k : {0, 1, 40, 5000})
      for (double top_p : {1.0, 0.95, 0.5}) {
        SamplingParams p;
        p.temperature = t;
        p.top_k = k;
        p.top_p = top_p;
        out.push_back(p);
      }
  return out;
}

std::string describe(const SamplingParams& p) {
  return "T " + std::to_string(p.temperature) + " top_k " + std::to_string(p.top_k) + " top_p " +
         std::to_string(p.top_p);
}

// Logits of a model-like spread (a few large values, a long tail), with ties and masked ids.
std::vector<float> random_logits(Rng& rng, size_t V, double scale) {
  std::vector<float> x(V);
  for (float& v : x) v = static_cast<float>((rng.uniform() - 0.7) * scale);
  for (size_t i = 0; i < V / 50; ++i) x[rng.below(V)] += static_cast<float>(scale);
  if (V > 8) {
    x[rng.below(V)] = -std::numeric_limits<float>::infinity();
    x[3] = x[5];  // a tie
  }
  return x;
}

TEST(SamplerBits, ProductionIsTheScalarReferenceOnEveryTarget) {
  const std::vector<SamplingParams> grid = params_grid();
  for (int64_t target : kernels::available_targets()) {
    kernels::force_target(target);
    SCOPED_TRACE("target " + kernels::target_name(target));
    Rng rng(19, 2);
    for (size_t V : {1, 7, 33, 1000, 4099}) {
      for (double scale : {1.0, 8.0, 40.0}) {
        const std::vector<float> logits = random_logits(rng, V, scale);
        for (const SamplingParams& p : grid) {
          const std::vector<TokenLogprob> got = sampling_distribution(logits, p);
          const std::vector<TokenLogprob> want = reference_distribution(logits, p);
          ASSERT_EQ(got.size(), want.size()) << "V " << V << " " << describe(p);
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(got[i].token, want[i].token) << "V " << V << " " << describe(p) << " #" << i;
            ASSERT_EQ(bits(got[i].logprob), bits(want[i].logprob))
                << "V " << V << " " << describe(p) << " #" << i;
          }
          for (uint64_t pos = 0; pos < 8; ++pos) {
            const double u = positional_uniform(V * 131 + pos, pos);
            ASSERT_EQ(pick_index(got, u), reference_pick(want, u)) << "V " << V << " u " << u;
          }
        }
      }
    }
  }
  kernels::force_target(0);
}

// The draw sits at a cumulative boundary: the uniform just below and at the first entry's
// probability picks entries 0 and 1, on the production path as in the reference.
TEST(SamplerBits, PickAtTheCumulativeBoundary) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f};
  const std::vector<TokenLogprob> dist = sampling_distribution(logits, {});
  const double p0 = kernels::fixed_exp(static_cast<double>(dist[0].logprob));
  EXPECT_EQ(pick_index(dist, std::nextafter(p0, 0.0)), 0u);
  EXPECT_EQ(pick_index(dist, p0), 1u);
  EXPECT_EQ(pick_index(dist, 0.999999999999), 2u);
}

// Golden digest of the distributions and positional draws on fixed logits (from the pinned Rng
// and exact conversions) under several sampling settings. Recorded on x86-64 (2026-12-01). A
// machine, compiler or flag that changes one bit of one log-prob or one drawn token fails here.
TEST(SamplerBits, GoldenDigest) {
  constexpr uint64_t kGolden = 0xb0353e9638845b96ull;
  Rng rng(2026, 19);
  const std::vector<float> logits = random_logits(rng, 4099, 12.0);
  std::vector<SamplingParams> settings(5);
  settings[1].temperature = 0.7;
  settings[1].top_k = 40;
  settings[2].top_p = 0.9;
  settings[3].temperature = 1.3;
  settings[3].top_k = 200;
  settings[3].top_p = 0.95;
  settings[4].temperature = 0.25;
  for (int64_t target : kernels::available_targets()) {
    kernels::force_target(target);
    Digest d;
    for (const SamplingParams& p : settings) {
      for (const TokenLogprob& t : sampling_distribution(logits, p)) d.add(t);
      Sampler sampler(p, 0x5eed, 0, DrawMode::kPositional);
      for (uint64_t pos = 0; pos < 64; ++pos) {
        const SampledToken s = sampler.sample(logits, pos);
        d.add({s.token, s.logprob});
      }
    }
    EXPECT_EQ(d.h, kGolden) << kernels::target_name(target) << std::hex << ": digest 0x" << d.h;
  }
  kernels::force_target(0);
}

}  // namespace
}  // namespace stoa::engine
