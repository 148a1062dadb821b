// `stoa bench pulse`, torch-free: given the master weights at a base version and after k
// optimiser steps, measures what PULSE ships against what other systems would send, how fast it
// encodes and applies, and whether the receiver ends bit-identical. The trainer-driven command
// (bench/pulse_train_bench.cpp) feeds it real AdamW snapshots; run_simulated_pulse_bench feeds
// it simulated ones (adam_sim.h) where no trainer is built.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bench/adam_sim.h"
#include "pulse/format.h"
#include "pulse/int8_state.h"
#include "pulse/quantizer.h"

namespace stoa::pulse {

struct PulseBenchRun {
  double lr = 0;
  int steps = 0;
  double changed_fraction = 0;    // int8 values that differ from the base view
  uint64_t patch_bytes = 0;       // the PULSE blob, envelope included
  uint64_t full_int8_bytes = 0;   // raw int8 view: values + f16 scales + bf16 small tensors
  uint64_t full_bf16_bytes = 0;   // every parameter as bf16
  uint64_t xor_zstd_bytes = 0;    // zstd(XOR(old, new) over the raw int8 view)
  uint64_t full_zstd_bytes = 0;   // zstd of the whole int8 view (= an anchor blob)
  uint64_t bf16_patch_bytes = 0;  // a PULSE patch of the bf16 view (upstream PULSE's setting)
  double encode_mbps = 0;         // MB of int8 view per second: quantise + diff + encode
  double apply_mbps = 0;          // MB of int8 view per second: decode + verified apply
  bool bitexact = false;
  // Not in the JSON: details for the notes.
  double encode_seconds = 0;
  double apply_seconds = 0;
  std::map<std::string, uint64_t> coding_bytes;  // patch size per position coding
};

struct PulseBenchOptions {
  int zstd_level = 1;
  PositionCoding coding = kDefaultPositionCoding;
  int apply_repeats = 3;         // apply timing is the best of this many
  bool measure_codings = false;  // also encode with every position coding
};

class PulseBench {
 public:
  // Quantises the base weights onto a fresh grid (the anchor every run is measured against).
  PulseBench(const WeightViews& base, PulseBenchOptions options = {});
  // Weights after `steps` optimiser steps at `lr` from the base.
  const PulseBenchRun& measure(double lr, int steps, const WeightViews& weights);
  const std::vector<PulseBenchRun>& runs() const { return runs_; }
  const Int8State& base_view() const { return base_; }
  // {"runs": [{lr, steps, changed_fraction, patch_bytes, ...}]} exactly as issue 5 specifies.
  nlohmann::json to_json() const;

 private:
  PulseBenchOptions options_;
  Int8State base_;
  Int8State base_bf16_;
  std::vector<PulseBenchRun> runs_;
};

// Every parameter as bf16 in an Int8State container (all tensors kBf16).
Int8State bf16_view(const WeightViews& weights, uint64_t version);
// The int8 view's raw bytes in name order (values, scales, bf16), for the XOR/zstd baselines.
std::vector<uint8_t> raw_state_bytes(const Int8State& state);

// Simulated AdamW on a Qwen3-shaped model (sim_layout_100m() by default): for each lr, from the
// same initial weights, runs max(steps) steps and measures after each listed count.
std::vector<PulseBenchRun> run_simulated_pulse_bench(const SimLayout& layout,
                                                     const std::vector<double>& lrs,
                                                     const std::vector<int>& steps, uint64_t seed,
                                                     PulseBenchOptions options,
                                                     nlohmann::json* json_out);

}  // namespace stoa::pulse
