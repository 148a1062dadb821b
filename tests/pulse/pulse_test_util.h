// Shared fixtures for the PULSE tests: small int8 views produced from simulated AdamW training.
#pragma once
#include <cstring>
#include <vector>

#include "pulse/adam_sim.h"
#include "pulse/int8_state.h"
#include "pulse/quantizer.h"

namespace stoa::pulse::testing {

// Byte-for-byte equality of two states (values, scales, bf16, version), beyond the hashes.
inline bool same_bytes(const Int8State& a, const Int8State& b) {
  if (a.size() != b.size() || a.version() != b.version()) return false;
  for (const auto& [name, ta] : a.tensors()) {
    if (!b.has(name)) return false;
    const StateTensor& tb = b.at(name);
    if (ta.kind != tb.kind || ta.shape != tb.shape) return false;
    if (ta.q.values != tb.q.values || ta.q.scales != tb.q.scales || ta.bf16 != tb.bf16)
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

}  // namespace stoa::pulse::testing
