// Shared fixtures for the PULSE tests: small int8 views produced from simulated AdamW training.
#pragma once
#include <cstring>
#include <random>
#include <vector>

#include "bench/adam_sim.h"
#include "model/presets.h"
#include "model/weights.h"
#include "pulse/int8_state.h"
#include "pulse/model_view.h"
#include "pulse/quantizer.h"

namespace stoa::pulse::testing {

// Byte-for-byte equality of two states (values, scales, bf16, f32, version), beyond the hashes.
inline bool same_bytes(const Int8State& a, const Int8State& b) {
  if (a.size() != b.size() || a.version() != b.version()) return false;
  for (const auto& [name, ta] : a.tensors()) {
    if (!b.has(name)) return false;
    const StateTensor& tb = b.at(name);
    if (ta.kind != tb.kind || ta.shape != tb.shape) return false;
    if (ta.q.values != tb.q.values || ta.q.scales != tb.q.scales || ta.bf16 != tb.bf16 ||
        ta.f32 != tb.f32)
      return false;
  }
  return true;
}

// A sequence of int8 views of a simulated training run: versions 0..n, lr per step.
inline std::vector<Int8State> sim_chain(int versions, float lr, uint64_t seed = 7,
                                        SimLayout layout = sim_layout_tiny()) {
  AdamSimulator sim(layout, seed);
  Int8Quantizer quant;
  std::vector<Int8State> out;
  out.push_back(quant.quantize(sim.views(), 0));
  for (int v = 1; v < versions; ++v) {
    sim.step(lr);
    out.push_back(quant.quantize(sim.views(), static_cast<uint64_t>(v)));
  }
  return out;
}

// Int8 views of tiny-lfm2moe at versions 0..n-1, so that all three kinds occur (int8 grid, bf16
// norms/conv kernels, f32 router + expert_bias). Every step adds N(0, noise) to EVERY weight,
// the router and expert_bias included (the trainer freezes expert_bias; changing it here
// exercises the f32 patch path on both f32 tensors); every 3rd step triples the first group of
// every matrix, so re-scaled groups occur too.
inline std::vector<Int8State> moe_chain(int versions, float noise = 1e-4f, uint64_t seed = 11) {
  ModelWeights w = random_weights(preset_config("tiny-lfm2moe"), seed);
  Int8Quantizer quant;
  std::vector<Int8State> out;
  out.push_back(int8_view_of(w, 0, &quant));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> step(0.0f, noise);
  for (int v = 1; v < versions; ++v) {
    for (auto& [name, t] : w.tensors) {
      float* x = t.as<float>();
      for (int64_t i = 0; i < t.numel(); ++i) x[i] += step(rng);
      if (v % 3 == 0 && t.rank() == 2)
        for (int64_t i = 0; i < 32 && i < t.numel(); ++i) x[i] *= 3.0f;
    }
    out.push_back(quant.quantize(weight_views(w), static_cast<uint64_t>(v)));
  }
  return out;
}

}  // namespace stoa::pulse::testing
