// Shared fixtures for the PULSE tests: small int8 views produced from simulated AdamW training.
#pragma once
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench/adam_sim.h"
#include "model/presets.h"
#include "model/weights.h"
#include "pulse/int8_state.h"
#include "pulse/model_view.h"
#include "pulse/publisher.h"
#include "pulse/quantizer.h"

namespace stoa::pulse::testing {

// A directory under the system temp dir, empty at the start and removed at the end.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name) {
    path = std::filesystem::temp_directory_path() /
           ("stoa_pulse_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

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

// A synthetic int8 state of `tensors` matrices [rows, cols] (values in [-30, 30], fixed scales):
// what the memory and scale tests load, without the f32 masters a quantiser would need.
inline Int8State synthetic_state(int64_t tensors, int64_t rows, int64_t cols, uint64_t seed) {
  Int8State state;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t t = 0; t < tensors; ++t) {
    Int8Matrix q;
    q.rows = rows;
    q.cols = cols;
    q.values.resize(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < q.values.size(); i += 8) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      for (int b = 0; b < 8; ++b) q.values[i + b] = static_cast<int8_t>((x >> (8 * b)) % 61) - 30;
    }
    q.scales.assign(static_cast<size_t>(rows * cols / kInt8GroupSize),
                    static_cast<uint16_t>(0x2000 + (t & 0xff)));
    state.add_int8("layers." + std::to_string(100 + t) + ".weight", std::move(q));
  }
  state.set_version(1);
  return state;
}

// The next version with about one value in `one_in` moved by one step, at pseudo-random
// positions (the sparsity of a step at lr 1e-6: ~0.3-0.5% of the values).
inline Int8State synthetic_step(const Int8State& from, uint32_t one_in = 200, uint64_t seed = 3) {
  Int8State to = from;
  StateEditor edit(to);
  uint64_t x = seed * 0xD1B54A32D192ED03ull + 7;
  for (const auto& [name, t] : from.tensors()) {
    StateTensor& m = edit.tensor(name);
    for (size_t i = 0; i < m.q.values.size(); ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      if (x % one_in == 0)
        m.q.values[i] = static_cast<int8_t>(m.q.values[i] == 30 ? 29 : m.q.values[i] + 1);
    }
    edit.rehash(name);
  }
  to.set_version(from.version() + 1);
  return to;
}

// What the trainer hands the publisher (Trainer::for_each_weight): every master, in name order.
inline MasterStream masters_of(const ModelWeights& w) {
  return [&w](const MasterSink& take) {
    for (const auto& [name, t] : w.tensors) take(name, t.shape(), t.as<const float>());
  };
}

}  // namespace stoa::pulse::testing
