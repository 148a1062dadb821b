// The trainer's publish path: versions made from the f32 masters tensor by tensor into the
// publisher's one int8 view give, blob for blob, what publishing the whole int8 state gives and
// what make_patch / encode_anchor make of the whole states — over anchors, pruning and a restart
// — and a version that fails publishes nothing. tiny-lfm2moe: all three carriers occur.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iterator>
#include <limits>
#include <random>
#include <utility>

#include "core/error.h"
#include "core/file_bytes.h"
#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse/publisher.h"
#include "pulse_test_util.h"

namespace stoa::pulse {
namespace {

namespace fs = std::filesystem;
using testing::same_bytes;

using testing::masters_of;
using testing::TempDir;

// One optimiser step's worth of change: N(0, 1e-4) on every weight; every 3rd version the first
// group of every matrix triples (re-scaled groups).
void step(ModelWeights& w, uint64_t version, std::mt19937_64& rng) {
  std::normal_distribution<float> noise(0.0f, 1e-4f);
  for (auto& [name, t] : w.tensors) {
    float* x = t.as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) x[i] += noise(rng);
    if (version % 3 == 0 && t.rank() == 2)
      for (int64_t i = 0; i < 32 && i < t.numel(); ++i) x[i] *= 3.0f;
  }
}

TEST(PulsePublisherStream, BlobsAndCatalogAreThoseOfWholeStatesOverAnchorsAndARestart) {
  TempDir whole_dir("publisher_whole"), streamed_dir("publisher_streamed");
  BlobStore whole_store(whole_dir.path.string()), streamed_store(streamed_dir.path.string());
  const PublisherOptions options{3, RetentionPolicy{2}, {}};
  ModelWeights w = random_weights(preset_config("tiny-lfm2moe"), 11);
  const Hash128 config = config_hash(w.config);
  std::mt19937_64 rng(5);
  int anchors = 0, patches = 0, pruned = 0;
  // Two lives of the trainer: the second starts from the catalog on disk and no view (a restart
  // from a checkpoint), as TrainerLoop does; both publishers rebuild the view at 4 from their
  // store and go on with a patch, so the reference quantizer's grid carries over the restart.
  const std::pair<uint64_t, uint64_t> lives[] = {{0, 4}, {5, 9}};
  Int8Quantizer quantizer;
  std::optional<Int8State> previous;
  for (const auto& [first, last] : lives) {
    Publisher whole(whole_store, options), streamed(streamed_store, options);
    for (uint64_t v = first; v <= last; ++v) {
      SCOPED_TRACE(cat("version ", v));
      if (v > 0) step(w, v, rng);
      Int8State state = int8_view_of(w, v, &quantizer);
      const Published want = whole.publish(state);
      const Published got = streamed.publish(v, config, masters_of(w));
      EXPECT_EQ(got.patch.has_value(), previous.has_value());
      EXPECT_EQ(got.anchor.has_value(), !previous || v % 3 == 0);
      EXPECT_EQ(got.rebuilt_from,
                v == first && v > 0 ? std::optional<uint64_t>(v - 1) : std::nullopt);
      EXPECT_EQ(want.rebuilt_from, got.rebuilt_from);
      EXPECT_TRUE(got.patch == want.patch);
      EXPECT_TRUE(got.anchor == want.anchor);
      EXPECT_EQ(got.pruned, want.pruned);
      if (got.patch) {
        ++patches;
        EXPECT_TRUE(streamed_store.get(got.patch->hash) ==
                    encode_patch(make_patch(*previous, state)));
      }
      if (got.anchor) {
        ++anchors;
        EXPECT_TRUE(streamed_store.get(got.anchor->hash) == encode_anchor(state));
      }
      pruned += static_cast<int>(got.pruned.size());
      ASSERT_NE(streamed.current(), nullptr);
      EXPECT_TRUE(same_bytes(*streamed.current(), state));
      EXPECT_EQ(streamed.current()->state_hash(), state.state_hash());
      previous = std::move(state);
    }
  }
  EXPECT_EQ(anchors, 4);  // 0, 3, 6, 9: the restart at 5 is a patch
  EXPECT_EQ(patches, 9);
  EXPECT_GT(pruned, 0);
  EXPECT_TRUE(read_file((whole_dir.path / "catalog.json").string()) ==
              read_file((streamed_dir.path / "catalog.json").string()));
  EXPECT_EQ(whole_store.list(), streamed_store.list());
  for (const auto& e : fs::directory_iterator(streamed_dir.path))  // no temp file left behind
    EXPECT_TRUE(e.path().filename() == "catalog.json" ||
                e.path().filename().string().size() == 32u);
}

TEST(PulsePublisherStream, AVersionThatFailsPublishesNothingAndTheNextGoesOnFromTheStore) {
  TempDir dir("publisher_fail");
  BlobStore store(dir.path.string());
  Publisher publisher(store, PublisherOptions{10, RetentionPolicy{3}, {}});
  ModelWeights w = random_weights(preset_config("tiny-lfm2moe"), 3);
  const Hash128 config = config_hash(w.config);
  Int8Quantizer quantizer;  // the reference: a grid that never stops
  publisher.publish(0, config, masters_of(w));
  const Int8State state0 = int8_view_of(w, 0, &quantizer);
  std::mt19937_64 rng(1);
  step(w, 1, rng);
  // The last tensor in name order: every other one is already updated in the view when it throws.
  Tensor& last = std::prev(w.tensors.end())->second;
  const float kept = last.as<float>()[0];
  last.as<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(publisher.publish(1, config, masters_of(w)), Error);
  EXPECT_TRUE(publisher.current() == nullptr);
  EXPECT_EQ(publisher.catalog().latest_version(), 0u);
  EXPECT_EQ(store.list().size(), 1u);  // the anchor at 0
  last.as<float>()[0] = kept;
  // The next publish rebuilds the view at 0 from the store and goes on with a patch.
  const Published one = publisher.publish(1, config, masters_of(w));
  EXPECT_EQ(one.rebuilt_from, 0u);
  EXPECT_FALSE(one.anchor.has_value());
  ASSERT_TRUE(one.patch.has_value());
  const Int8State state1 = int8_view_of(w, 1, &quantizer);
  EXPECT_TRUE(store.get(one.patch->hash) == encode_patch(make_patch(state0, state1)));
  // A model with a tensor missing is refused (the view needs every tensor).
  const MasterStream all_but_the_first = [&w](const MasterSink& take) {
    for (auto it = std::next(w.tensors.begin()); it != w.tensors.end(); ++it)
      take(it->first, it->second.shape(), it->second.as<const float>());
  };
  EXPECT_THROW(publisher.publish(2, config, all_but_the_first), Error);
  EXPECT_EQ(publisher.catalog().latest_version(), 1u);
  // After that failure too the next version goes on from the store's view at 1.
  step(w, 2, rng);
  const Published two = publisher.publish(2, config, masters_of(w));
  EXPECT_EQ(two.rebuilt_from, 1u);
  EXPECT_FALSE(two.anchor.has_value());
  ASSERT_TRUE(two.patch.has_value());
  EXPECT_TRUE(store.get(two.patch->hash) ==
              encode_patch(make_patch(state1, int8_view_of(w, 2, &quantizer))));
  for (const auto& e : fs::directory_iterator(dir.path))
    EXPECT_TRUE(e.path().filename() == "catalog.json" ||
                e.path().filename().string().size() == 32u);
}

}  // namespace
}  // namespace stoa::pulse
