// PULSE at the seed model's size, on one core: making a version (make_patch + encode) and
// applying it on the worker (decode + verified in-place apply + the engine's in-place scatter
// into packed panels) on a large synthetic int8 state with ~0.5% of the values changed. Prints
// the figures with the throughput extrapolated to the 8.9 GB int8 model (targets: make <= 30 s,
// apply <= 5 s). STOA_PULSE_SCALE_GB sets the state size (default 1; the machine must hold about
// 3.2x that). Label `slow`: a measurement, not a CI check; the assertions are loose floors that
// only a pathological regression (a full copy per tensor, a quadratic path) would break.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "engine/linear.h"
#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse/pulse_test_util.h"

namespace stoa::pulse {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

TEST(PulseScale, MakeAndApplyAVersionOfALargeState) {
  const char* env = std::getenv("STOA_PULSE_SCALE_GB");
  const double gb = env ? std::atof(env) : 1.0;
  constexpr int64_t kRows = 4096, kCols = 4096;
  const auto tensors = std::max<int64_t>(1, static_cast<int64_t>(gb * 1e9 / (kRows * kCols)));
  const Int8State from = testing::synthetic_state(tensors, kRows, kCols, 1);
  const Int8State to = testing::synthetic_step(from);
  const double bytes = static_cast<double>(from.nbytes());

  auto t = Clock::now();
  const Patch patch = make_patch(from, to);
  const double diff_s = since(t);
  t = Clock::now();
  const std::vector<uint8_t> blob = encode_patch(patch);
  const double encode_s = since(t);
  const double changed =
      static_cast<double>(patch.values_written()) / static_cast<double>(from.int8_numel());

  // The worker: its engine's packed linears (what it computes with) and its verified state.
  std::vector<engine::Linear> linears;
  for (const auto& [name, st] : from.tensors()) linears.push_back(engine::Linear::from_int8(st.q));
  Int8State worker = from;
  t = Clock::now();
  const Patch got = decode_patch(blob, patch_limits_for(worker));
  const double decode_s = since(t);
  t = Clock::now();
  apply_patch(worker, got);
  const double apply_s = since(t);
  t = Clock::now();
  for (size_t i = 0; i < got.tensors.size(); ++i) {
    const TensorPatch& tp = got.tensors[i];
    for (size_t k = 0; k < tp.positions.size(); ++k)
      linears[i].set_int8_value(static_cast<int64_t>(tp.positions[k]), tp.i8[k]);
  }
  const double scatter_s = since(t);
  EXPECT_EQ(worker.state_hash(), to.state_hash());
  for (size_t i = 0; i < linears.size(); i += std::max<size_t>(1, linears.size() / 4))
    EXPECT_EQ(linears[i].int8().values, to.at(got.tensors[i].name).q.values);

  const double scale = 8.9e9 / bytes;
  std::printf(
      "int8 state %.2f GB, %.3f%% values changed, patch %.1f MB (%.3f%% of the int8 bytes)\n"
      "make: diff %.2f s + encode %.2f s = %.2f s (%.0f MB/s) -> 8.9 GB: %.1f s\n"
      "apply: decode %.2f s + verified apply %.2f s + engine scatter %.2f s = %.2f s -> 8.9 GB: "
      "%.1f s\nload average %s\n",
      bytes / 1e9, 100 * changed, blob.size() / 1e6, 100.0 * blob.size() / bytes, diff_s, encode_s,
      diff_s + encode_s, bytes / 1e6 / (diff_s + encode_s), (diff_s + encode_s) * scale, decode_s,
      apply_s, scatter_s, decode_s + apply_s + scatter_s, (decode_s + apply_s + scatter_s) * scale,
      load_average().c_str());
  EXPECT_GT(bytes / (diff_s + encode_s), 50e6);
  EXPECT_GT(bytes / (decode_s + apply_s + scatter_s), 200e6);
}

}  // namespace
}  // namespace stoa::pulse
