#include "bench/pulse_bench.h"

#include <algorithm>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "pulse/patch.h"

namespace stoa::pulse {

namespace {

// Throughput is "MB per second on one core": both timed stages run on the calling thread, so
// its CPU time is the honest measure on a shared machine (wall time there counts the minutes
// other processes held the core). On an idle machine the two agree.
double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool same_state(const Int8State& a, const Int8State& b) {
  if (a.size() != b.size() || !(a.state_hash() == b.state_hash())) return false;
  for (const auto& [name, ta] : a.tensors()) {
    const StateTensor& tb = b.at(name);
    if (ta.q.values != tb.q.values || ta.q.scales != tb.q.scales || ta.bf16 != tb.bf16 ||
        ta.f32 != tb.f32)
      return false;
  }
  return true;
}

}  // namespace

Int8State bf16_view(const WeightViews& weights, uint64_t version) {
  Int8State s;
  s.set_version(version);
  for (const auto& [name, view] : weights) {
    STOA_CHECK(view.dtype == DType::kF32 && view.is_contiguous(), ErrorKind::kInvalidArgument,
               "bench: tensor '", name, "' must be contiguous f32");
    std::vector<uint16_t> bf16(static_cast<size_t>(view.numel()));
    convert_f32_to_bf16(view.as<const float>(), bf16.data(), bf16.size());
    s.add_bf16(name, view.shape, std::move(bf16));
  }
  return s;
}

std::vector<uint8_t> raw_state_bytes(const Int8State& state) {
  std::vector<uint8_t> out;
  out.reserve(state.nbytes());
  for (const auto& [name, t] : state.tensors()) {
    auto append = [&](const void* p, size_t n) {
      const auto* b = static_cast<const uint8_t*>(p);
      out.insert(out.end(), b, b + n);
    };
    if (t.kind == TensorKind::kInt8) {
      append(t.q.values.data(), t.q.values.size());
      append(t.q.scales.data(), t.q.scales.size() * 2);
    } else if (t.kind == TensorKind::kBf16) {
      append(t.bf16.data(), t.bf16.size() * 2);
    } else {
      append(t.f32.data(), t.f32.size() * 4);
    }
  }
  return out;
}

PulseBench::PulseBench(const WeightViews& base, PulseBenchOptions options) : options_(options) {
  Int8Quantizer q;
  base_ = q.quantize(base, 0);
  base_bf16_ = bf16_view(base, 0);
}

const PulseBenchRun& PulseBench::measure(double lr, int steps, const WeightViews& weights) {
  PulseBenchRun run;
  run.lr = lr;
  run.steps = steps;
  const double mb = static_cast<double>(base_.nbytes()) / 1e6;

  // Encode: what the publisher does per version — quantise on the frozen grid, diff, serialise,
  // compress.
  Int8Quantizer quant;
  quant.adopt_grid(base_);
  double t0 = thread_seconds();
  Int8State view = quant.quantize(weights, 1);
  Patch patch = make_patch(base_, view);
  std::vector<uint8_t> blob =
      encode_patch(patch, EncodeOptions{options_.coding, options_.zstd_level});
  run.encode_seconds = thread_seconds() - t0;
  run.encode_mbps = mb / run.encode_seconds;
  run.patch_bytes = blob.size();

  // Apply: what a worker does — verify and decode the blob, scatter, verify the hashes.
  run.apply_seconds = 1e30;
  bool exact = true;
  for (int r = 0; r < std::max(1, options_.apply_repeats); ++r) {
    Int8State receiver = base_;
    double t1 = thread_seconds();
    apply_patch(receiver, decode_patch(blob));
    run.apply_seconds = std::min(run.apply_seconds, thread_seconds() - t1);
    exact = exact && same_state(receiver, view) && receiver.version() == view.version();
  }
  run.apply_mbps = mb / run.apply_seconds;
  run.bitexact = exact;

  // Changed fraction over the int8 values.
  uint64_t changed = 0;
  for (const auto& [name, t] : view.tensors()) {
    if (t.kind != TensorKind::kInt8) continue;
    const auto& a = base_.at(name).q.values;
    for (size_t i = 0; i < a.size(); ++i) changed += a[i] != t.q.values[i];
  }
  run.changed_fraction = static_cast<double>(changed) / static_cast<double>(view.int8_numel());

  // Baselines.
  run.full_int8_bytes = view.nbytes();
  run.full_bf16_bytes = static_cast<uint64_t>(view.numel()) * 2;
  run.full_zstd_bytes = zstd_compress(raw_state_bytes(view), options_.zstd_level).size();
  {
    std::vector<uint8_t> a = raw_state_bytes(base_);
    std::vector<uint8_t> b = raw_state_bytes(view);
    for (size_t i = 0; i < a.size(); ++i) a[i] ^= b[i];
    run.xor_zstd_bytes = zstd_compress(a, options_.zstd_level).size();
  }
  {
    Int8State bf16_now = bf16_view(weights, 1);
    run.bf16_patch_bytes = encode_patch(make_patch(base_bf16_, bf16_now),
                                        EncodeOptions{options_.coding, options_.zstd_level})
                               .size();
  }
  if (options_.measure_codings) {
    for (auto coding : {PositionCoding::kVarint, PositionCoding::kFixed, PositionCoding::kShuffled,
                        PositionCoding::kRowCol})
      run.coding_bytes[position_coding_name(coding)] =
          encode_patch(patch, EncodeOptions{coding, options_.zstd_level}).size();
  }
  runs_.push_back(run);
  return runs_.back();
}

nlohmann::json PulseBench::to_json() const {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : runs_)
    runs.push_back({{"lr", r.lr},
                    {"steps", r.steps},
                    {"changed_fraction", r.changed_fraction},
                    {"patch_bytes", r.patch_bytes},
                    {"full_int8_bytes", r.full_int8_bytes},
                    {"full_bf16_bytes", r.full_bf16_bytes},
                    {"xor_zstd_bytes", r.xor_zstd_bytes},
                    {"full_zstd_bytes", r.full_zstd_bytes},
                    {"bf16_patch_bytes", r.bf16_patch_bytes},
                    {"encode_mbps", r.encode_mbps},
                    {"apply_mbps", r.apply_mbps},
                    {"bitexact", r.bitexact}});
  return {{"runs", runs}};
}

std::vector<PulseBenchRun> run_simulated_pulse_bench(const SimLayout& layout,
                                                     const std::vector<double>& lrs,
                                                     const std::vector<int>& steps, uint64_t seed,
                                                     PulseBenchOptions options,
                                                     nlohmann::json* json_out) {
  STOA_CHECK(!steps.empty(), ErrorKind::kInvalidArgument, "bench: no step counts");
  AdamSimulator sim(layout, seed);
  PulseBench bench(sim.views(), options);
  int max_steps = *std::max_element(steps.begin(), steps.end());
  for (double lr : lrs) {
    sim.reset();
    for (int s = 1; s <= max_steps; ++s) {
      sim.step(static_cast<float>(lr));
      if (std::find(steps.begin(), steps.end(), s) != steps.end())
        bench.measure(lr, s, sim.views());
    }
  }
  if (json_out) *json_out = bench.to_json();
  return bench.runs();
}

}  // namespace stoa::pulse
