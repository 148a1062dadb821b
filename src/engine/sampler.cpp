#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/fixed_math_span.h"

namespace stoa::engine {
namespace {

// Descending by value, ties to the lower id: a total order, so truncation is reproducible.
struct ByValueDesc {
  const std::vector<double>* z;
  bool operator()(int32_t a, int32_t b) const {
    double za = (*z)[static_cast<size_t>(a)], zb = (*z)[static_cast<size_t>(b)];
    return za != zb ? za > zb : a < b;
  }
};

// The log-sum-exp of z over `ids`, summed in the order of `ids` (kernels::fixed_logsumexp's
// fixed 32-partial-sum order); `zs` receives z gathered in that order.
double log_sum_exp(const std::vector<double>& z, const std::vector<int32_t>& ids,
                   std::vector<double>& zs) {
  zs.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) zs[i] = z[static_cast<size_t>(ids[i])];
  return kernels::fixed_logsumexp(zs.data(), zs.size());
}

// Exps are computed a chunk at a time (vectorised, the same bits as one at a time) so that a
// running sum that stops early does not pay for the whole vocabulary.
constexpr size_t kExpChunk = 256;

// How many leading entries of `zs` (descending) reach probability mass `top_p`: the running sum
// of fixed_exp(zs[i] - lse), in order, first >= top_p (all of them if rounding never gets there).
size_t nucleus_size(const std::vector<double>& zs, double lse, double top_p) {
  double e[kExpChunk];
  double mass = 0;
  for (size_t i = 0; i < zs.size(); i += kExpChunk) {
    const size_t n = std::min(kExpChunk, zs.size() - i);
    kernels::fixed_exp_array(zs.data() + i, lse, n, e);
    for (size_t j = 0; j < n; ++j) {
      mass += e[j];
      if (mass >= top_p) return i + j + 1;
    }
  }
  return zs.size();
}

// The nucleus of an unsorted support: its leading entries in descending order, as many as reach
// `top_p` under the normaliser `lse`, left sorted at the front of `ids` (the count is returned).
// A nucleus is usually a few dozen tokens of a vocabulary of 10^4-10^5, so instead of sorting the
// whole support (3.7 ms a token at V = 32768, measured 1 Dec) the descending order is built a
// block at a time: nth_element brings the next block's members forward, a sort orders just them,
// and their mass is added to the running sum. The order and the sums are those of a full sort
// (ByValueDesc is a total order), so the result is bit-identical to sorting everything first.
size_t nucleus_of_unsorted(const std::vector<double>& z, std::vector<int32_t>& ids, double lse,
                           double top_p, std::vector<double>& zs) {
  constexpr size_t kFirstBlock = 64;
  const ByValueDesc desc{&z};
  double e[kExpChunk];
  double mass = 0;
  double last_p = 1;  // the probability of ids[done - 1]: no later id is more likely
  size_t done = 0;    // ids[0, done) are sorted and every later id is below them
  for (size_t end = std::min(kFirstBlock, ids.size()); done < ids.size();) {
    const auto first = ids.begin() + static_cast<std::ptrdiff_t>(done);
    const auto last = ids.begin() + static_cast<std::ptrdiff_t>(end);
    if (end < ids.size()) std::nth_element(first, last, ids.end(), desc);
    std::sort(first, last, desc);
    zs.resize(end - done);
    for (size_t i = done; i < end; ++i) zs[i - done] = z[static_cast<size_t>(ids[i])];
    for (size_t i = 0; i < zs.size(); i += kExpChunk) {
      const size_t n = std::min(kExpChunk, zs.size() - i);
      kernels::fixed_exp_array(zs.data() + i, lse, n, e);
      for (size_t j = 0; j < n; ++j) {
        mass += e[j];
        if (mass >= top_p) return done + i + j + 1;
      }
      last_p = e[n - 1];
    }
    // The next block: four times this one, and at least the ids the missing mass needs when
    // each brings at most last_p (a flat distribution's nucleus is thousands of ids).
    const double needed = last_p > 0 ? (top_p - mass) / last_p : static_cast<double>(ids.size());
    const size_t grow = std::max(
        4 * (end - done), static_cast<size_t>(std::min(needed, static_cast<double>(ids.size()))));
    done = end;
    end = std::min(ids.size(), done + grow);
  }
  return ids.size();
}

}  // namespace

void validate_sampling_params(const SamplingParams& p) {
  STOA_CHECK(std::isfinite(p.temperature) && p.temperature >= 0, ErrorKind::kInvalidArgument,
             "sampling temperature must be finite and >= 0, got ", p.temperature);
  STOA_CHECK(p.top_k >= 0, ErrorKind::kInvalidArgument, "sampling top_k must be >= 0, got ",
             p.top_k);
  STOA_CHECK(p.top_p > 0 && p.top_p <= 1, ErrorKind::kInvalidArgument,
             "sampling top_p must be in (0, 1], got ", p.top_p);
  STOA_CHECK(p.top_logprobs >= 0, ErrorKind::kInvalidArgument,
             "sampling top_logprobs must be >= 0, got ", p.top_logprobs);
}

namespace {

// Per-thread working memory of the sampler: a vocabulary-sized vector allocated per token was
// fresh pages from the kernel every time (measured 1 Dec: page faults and zeroing took ~60 % of
// a V = 32768 sample on the shared VM, the exps ~2 %).
struct Scratch {
  std::vector<double> z;           // logits / T by id
  std::vector<int32_t> ids;        // the support, in the order its sums run
  std::vector<double> zs;          // z gathered in that order
  std::vector<TokenLogprob> dist;  // Sampler::sample's distribution
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// sampling_distribution into `out` (cleared first), on `s`'s buffers.
void distribution_into(std::span<const float> logits, const SamplingParams& params, Scratch& s,
                       std::vector<TokenLogprob>& out) {
  validate_sampling_params(params);
  out.clear();
  const int64_t V = static_cast<int64_t>(logits.size());
  STOA_CHECK(V > 0, ErrorKind::kInvalidArgument, "cannot sample from empty logits");
  for (int64_t i = 0; i < V; ++i) {
    STOA_CHECK(
        !std::isnan(logits[static_cast<size_t>(i)]) && logits[static_cast<size_t>(i)] != INFINITY,
        ErrorKind::kInvalidArgument, "logit ", i, " is ", logits[static_cast<size_t>(i)]);
  }
  if (params.temperature == 0) {
    int32_t best = 0;
    for (int32_t i = 1; i < V; ++i) {
      if (logits[static_cast<size_t>(i)] > logits[static_cast<size_t>(best)]) best = i;
    }
    out.push_back({best, 0.0f});
    return;
  }

  std::vector<double>& z = s.z;
  std::vector<int32_t>& ids = s.ids;
  z.resize(static_cast<size_t>(V));
  ids.clear();
  for (int64_t i = 0; i < V; ++i)  // (a loop of its own, so that it vectorises)
    z[static_cast<size_t>(i)] = logits[static_cast<size_t>(i)] / params.temperature;
  // -inf logits (masked tokens) are outside the support.
  for (int64_t i = 0; i < V; ++i)
    if (!std::isinf(z[static_cast<size_t>(i)])) ids.push_back(static_cast<int32_t>(i));
  STOA_CHECK(!ids.empty(), ErrorKind::kInvalidArgument, "every logit is -inf");

  bool sorted = false;
  if (params.top_k > 0 && params.top_k < static_cast<int64_t>(ids.size())) {
    std::partial_sort(ids.begin(), ids.begin() + params.top_k, ids.end(), ByValueDesc{&z});
    ids.resize(static_cast<size_t>(params.top_k));
    sorted = true;
  }
  if (params.top_p < 1) {
    // Top-p's probabilities are normalised over the support in its order before the cut: id
    // order, or descending after top-k (the sum's order fixes its bits).
    const double lse = log_sum_exp(z, ids, s.zs);
    ids.resize(sorted ? nucleus_size(s.zs, lse, params.top_p)
                      : nucleus_of_unsorted(z, ids, lse, params.top_p, s.zs));
  }
  const double lse = log_sum_exp(z, ids, s.zs);
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    out.push_back({ids[i], static_cast<float>(s.zs[i] - lse)});
}

}  // namespace

std::vector<TokenLogprob> sampling_distribution(std::span<const float> logits,
                                                const SamplingParams& params) {
  std::vector<TokenLogprob> out;
  distribution_into(logits, params, scratch(), out);
  return out;
}

double positional_uniform(uint64_t seed, uint64_t position) {
  return Rng(seed, kSamplerPositionBase + position).uniform();
}

size_t pick_index(const std::vector<TokenLogprob>& dist, double u) {
  double p[kExpChunk];
  double cum = 0;
  for (size_t i = 0; i < dist.size(); i += kExpChunk) {
    const size_t n = std::min(kExpChunk, dist.size() - i);
    for (size_t j = 0; j < n; ++j) p[j] = static_cast<double>(dist[i + j].logprob);
    kernels::fixed_exp_array(p, 0.0, n, p);
    for (size_t j = 0; j < n; ++j) {
      cum += p[j];
      if (u < cum) return i + j;
    }
  }
  return dist.size() - 1;  // rounding can leave the total a hair under 1
}

Sampler::Sampler(SamplingParams params, uint64_t seed, uint64_t stream, DrawMode mode)
    : params_(params), rng_(seed, kSamplerStreamBase + stream), seed_(seed), mode_(mode) {
  validate_sampling_params(params_);
}

double Sampler::draw(uint64_t position) {
  // One draw per token, even when greedy, so a run's random stream does not depend on which
  // steps happened to be deterministic.
  return mode_ == DrawMode::kPositional ? positional_uniform(seed_, position) : rng_.uniform();
}

SampledToken Sampler::sample(std::span<const float> logits, uint64_t position) {
  return sample_with_uniform(logits, params_, draw(position));
}

SampledToken sample_with_uniform(std::span<const float> logits, const SamplingParams& params,
                                 double u) {
  Scratch& s = scratch();
  std::vector<TokenLogprob>& dist = s.dist;
  distribution_into(logits, params, s, dist);
  SampledToken out;
  const size_t pick = pick_index(dist, u);
  out.token = dist[pick].token;
  out.logprob = dist[pick].logprob;
  if (params.top_logprobs > 0) {
    const size_t k = std::min(dist.size(), static_cast<size_t>(params.top_logprobs));
    std::partial_sort(dist.begin(), dist.begin() + static_cast<std::ptrdiff_t>(k), dist.end(),
                      [](const TokenLogprob& a, const TokenLogprob& b) {
                        return a.logprob != b.logprob ? a.logprob > b.logprob : a.token < b.token;
                      });
    out.top.assign(dist.begin(), dist.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return out;
}

}  // namespace stoa::engine
