// Peak memory and time of the trainer's publish on a ~62M-parameter model (the simulated AdamW
// bench's layout cut to 6 layers: f32 masters 0.25 GB, int8 view S ~66 MB), publishing version 0
// (an anchor) and version 1 (a patch and an anchor) after one AdamW step at lr 1e-6. Measured in
// forked children above the masters they share with this process:
//   whole states — what TrainerLoop did before: the masters copied to a kept f32 scratch model,
//                  quantised into a new int8 state, diffed against the previous whole state;
//   streamed     — the masters handed one tensor at a time into the publisher's one int8 view.
// The streamed path must stay near one view (no f32 copy, no second state).
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "bench/adam_sim.h"
#include "core/error.h"
#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse/publisher.h"
#include "support/peak_memory.h"
#include "support/sanitizer.h"

namespace stoa::pulse {
namespace {

namespace fs = std::filesystem;
using Masters = std::map<std::string, Tensor>;

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Runs `publish` and puts its wall and CPU seconds into figures[at], figures[at + 1].
template <typename Fn>
void timed(std::array<double, 8>& figures, size_t at, Fn&& publish) {
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = process_cpu_seconds();
  publish();
  figures[at] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  figures[at + 1] = process_cpu_seconds() - c0;
}

MasterStream stream_of(const WeightViews& masters) {
  return [&masters](const MasterSink& take) {
    for (const auto& [name, view] : masters) take(name, view.shape, view.as<const float>());
  };
}

WeightViews views_of(const Masters& masters) {
  WeightViews out;
  for (const auto& [name, t] : masters) out.emplace(name, t.view());
  return out;
}

TEST(PulsePublisherMemory, TheStreamedPublishHoldsOneViewNotACopyAndTwoStates) {
  if (stoa::testing::kSanitizerShadowsMemory)
    GTEST_SKIP() << stoa::testing::kNoMemoryBoundsUnderSanitizer;
  const fs::path dir = fs::temp_directory_path() / cat("stoa_publisher_memory_", ::getpid());
  SimLayout layout = sim_layout_100m();
  layout.layers = 6;  // ~62M: within CI's time (the 12-layer 100M: docs/design/pulse.md)
  AdamSimulator sim(layout, 7);
  Masters v0;
  for (const auto& [name, view] : sim.views()) v0.emplace(name, to_f32(view));
  sim.step(1e-6f);
  const WeightViews masters[2] = {views_of(v0), sim.views()};
  const Hash128 config = hash_bytes("publisher memory test", 21);
  const PublisherOptions options{1, RetentionPolicy{3}, {}};

  const stoa::testing::ChildPeak whole = stoa::testing::child_peak(
      [] {},
      [&](std::array<double, 8>& figures) {
        // Publisher::publish of a whole state as it was: make_patch and encode_anchor in memory.
        BlobStore store((dir / "whole").string());
        Int8Quantizer quantizer;
        quantizer.set_config_hash(config);
        Masters scratch;  // TrainerLoop's kept f32 copy (copy_weights_to reused its buffers)
        std::optional<Int8State> previous;
        for (uint64_t v = 0; v < 2; ++v) {
          timed(figures, 2 * v, [&] {
            for (const auto& [name, view] : masters[v]) {
              auto it = scratch.find(name);
              if (it == scratch.end())
                scratch.emplace(name, to_f32(view));
              else
                std::memcpy(it->second.data(), view.as<const float>(), it->second.nbytes());
            }
            Int8State state = quantizer.quantize(views_of(scratch), v);
            if (previous) store.put(encode_patch(make_patch(*previous, state)));
            store.put(encode_anchor(state));
            previous = std::move(state);
          });
        }
        figures[4] = static_cast<double>(previous->nbytes());
      });
  const stoa::testing::ChildPeak streamed = stoa::testing::child_peak(
      [] {},
      [&](std::array<double, 8>& figures) {
        BlobStore store((dir / "streamed").string());
        Publisher publisher(store, options);
        for (uint64_t v = 0; v < 2; ++v)
          timed(figures, 2 * v, [&] { publisher.publish(v, config, stream_of(masters[v])); });
        figures[4] = static_cast<double>(publisher.current()->nbytes());
      });
  // The same blobs (anchors 0 and 1, the patch 0 -> 1) at this size too.
  const std::vector<Hash128> whole_blobs = BlobStore((dir / "whole").string()).list();
  EXPECT_EQ(whole_blobs.size(), 3u);
  EXPECT_EQ(BlobStore((dir / "streamed").string()).list(), whole_blobs);
  fs::remove_all(dir);
  ASSERT_GT(whole.growth, 0);
  ASSERT_GT(streamed.growth, 0);
  const double view_bytes = streamed.figures[4];
  EXPECT_EQ(whole.figures[4], view_bytes);
  std::printf(
      "%.0fM masters, int8 view S = %.1f MB: peak growth whole states %.1f MB (%.2f S), "
      "streamed %.1f MB (%.2f S)\n"
      "publish v0 (anchor): whole %.2f s wall %.2f s CPU, streamed %.2f s wall %.2f s CPU\n"
      "publish v1 (patch + anchor): whole %.2f s wall %.2f s CPU, streamed %.2f s wall %.2f s "
      "CPU\n",
      static_cast<double>(sim.numel()) / 1e6, view_bytes / 1e6, whole.growth / 1e6,
      whole.growth / view_bytes, streamed.growth / 1e6, streamed.growth / view_bytes,
      whole.figures[0], whole.figures[1], streamed.figures[0], streamed.figures[1],
      whole.figures[2], whole.figures[3], streamed.figures[2], streamed.figures[3]);
  // One view plus the patch and zstd's buffers; the whole-state path holds 4 bytes per master
  // (the f32 copy), two states, the anchor's raw payload and its blob: ~9 S.
  EXPECT_LE(streamed.growth, 1.3 * view_bytes);
  EXPECT_GE(static_cast<double>(whole.growth), 3.0 * static_cast<double>(streamed.growth));
}

}  // namespace
}  // namespace stoa::pulse
