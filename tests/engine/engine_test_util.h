// Shared helpers for the engine tests: tiny random models with non-trivial norms (random init
// sets norms to 1, which would hide a norm applied to the wrong axis) and peaked logits.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "engine/sampler.h"
#include "model/presets.h"
#include "model/weights.h"

namespace stoa::engine::testing {

inline ModelWeights tiny_model(const std::string& preset, uint64_t seed = 7, float std = 0.08f) {
  ModelWeights w = random_weights(preset_config(preset), seed, std);
  Rng rng(seed, kSamplerStreamBase + 99);  // the engine's stream space: the models they always were
  for (auto& [name, t] : w.tensors) {
    if (t.rank() == 1 && name.find("norm") != std::string::npos) {
      float* d = t.as<float>();
      for (int64_t i = 0; i < t.numel(); ++i)
        d[i] = 0.6f + 0.8f * static_cast<float>(rng.uniform());
    }
    if (name.find("conv.conv.weight") != std::string::npos) {
      // Conv kernels at a scale where the short conv visibly matters.
      float* d = t.as<float>();
      for (int64_t i = 0; i < t.numel(); ++i) d[i] = static_cast<float>(rng.uniform() - 0.5);
    }
  }
  return w;
}

inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  Rng rng(seed, kSamplerStreamBase + 5);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<int32_t>(rng.next() % vocab));
  return out;
}

// max |a - b| / max |a|, over equal-sized f32 tensors.
inline double max_rel_diff(const Tensor& a, const Tensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a.as<float>()[i] - b.as<float>()[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(a.as<float>()[i])));
  }
  return diff / scale;
}

// KL(p || q) of the softmaxes of two logit rows.
inline double kl_logits(const float* p_logits, const float* q_logits, int64_t n) {
  auto log_softmax = [n](const float* x) {
    double m = x[0];
    for (int64_t i = 1; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
    std::vector<double> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = x[i] - m - std::log(s);
    return out;
  };
  std::vector<double> lp = log_softmax(p_logits), lq = log_softmax(q_logits);
  double kl = 0;
  for (int64_t i = 0; i < n; ++i) {
    kl += std::exp(lp[static_cast<size_t>(i)]) *
          (lp[static_cast<size_t>(i)] - lq[static_cast<size_t>(i)]);
  }
  return kl;
}

}  // namespace stoa::engine::testing
