// patch_shares (pulse/patch_share.h): what each patch a publisher left in its store writes, read
// back from the store, against the patches made from the whole states; a tampered blob and a
// missing catalog are errors, a store without an anchor has no shares.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>

#include "core/error.h"
#include "pulse/patch.h"
#include "pulse/patch_share.h"
#include "pulse/publisher.h"
#include "pulse_test_util.h"

namespace stoa::pulse {
namespace {

using testing::masters_of;
using testing::TempDir;

TEST(PulsePatchShare, EachVersionsShareIsWhatItsPatchWritesOverTheViewsInt8Values) {
  TempDir dir("patch_share");
  BlobStore store(dir.path.string());
  Publisher publisher(store, PublisherOptions{10, RetentionPolicy{3}, {}});
  ModelWeights w = random_weights(preset_config("tiny-lfm2"), 3);
  const Hash128 config = config_hash(w.config);
  Int8Quantizer quantizer;
  std::optional<Int8State> previous;
  std::map<uint64_t, double> want;
  std::mt19937_64 rng(7);
  int64_t int8_values = 0;
  for (uint64_t v = 0; v <= 3; ++v) {
    // Version v moves every v-th weight of each tensor by a few of its int8 steps (v = 0: none).
    if (v > 0)
      for (auto& [name, t] : w.tensors) {
        float* x = t.as<float>();
        for (int64_t i = 0; i < t.numel(); i += static_cast<int64_t>(v)) x[i] *= 1.5f;
      }
    Int8State state = int8_view_of(w, v, &quantizer);
    int8_values = state.int8_numel();
    if (previous) {
      uint64_t written = 0;
      for (const TensorPatch& t : make_patch(*previous, state).tensors)
        if (t.kind == TensorKind::kInt8) written += t.values_written();
      want[v] = static_cast<double>(written) / static_cast<double>(int8_values);
    }
    publisher.publish(v, config, masters_of(w));
    previous = std::move(state);
  }
  const PatchShares got = patch_shares(dir.path.string());
  EXPECT_EQ(got.int8_values, int8_values);
  ASSERT_EQ(got.int8_share.size(), 3u);
  double sum = 0;
  for (const auto& [v, share] : want) {
    SCOPED_TRACE(v);
    EXPECT_DOUBLE_EQ(got.int8_share.at(v), share);
    EXPECT_GT(share, 0.0);
    sum += share;
  }
  // Every 1st, 2nd, 3rd weight moved: the shares fall with the version.
  EXPECT_GT(got.int8_share.at(1), got.int8_share.at(2));
  EXPECT_GT(got.int8_share.at(2), got.int8_share.at(3));
  EXPECT_DOUBLE_EQ(got.mean(), sum / 3);
  EXPECT_FALSE(got.touched.empty());
}

TEST(PulsePatchShare, ATamperedBlobOrAMissingCatalogIsAnErrorAndNoAnchorMeansNoShares) {
  TempDir dir("patch_share_bad");
  EXPECT_THROW((void)patch_shares(dir.path.string()), Error);  // no catalog.json
  {
    BlobStore store(dir.path.string());
    Publisher publisher(store, PublisherOptions{10, RetentionPolicy{3}, {}});
    ModelWeights w = random_weights(preset_config("tiny-lfm2"), 4);
    publisher.publish(0, config_hash(w.config), masters_of(w));
    for (auto& [name, t] : w.tensors) t.as<float>()[0] *= 4.0f;
    publisher.publish(1, config_hash(w.config), masters_of(w));
  }
  EXPECT_EQ(patch_shares(dir.path.string()).int8_share.size(), 1u);
  BlobStore store(dir.path.string());
  for (const Hash128& h : store.list()) {
    std::fstream f(store.path_of(h), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x5a');
  }
  try {
    (void)patch_shares(dir.path.string());
    FAIL() << "a tampered store was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity) << e.what();
  }
  PatchShares none;
  EXPECT_TRUE(std::isnan(none.mean()));
}

}  // namespace
}  // namespace stoa::pulse
