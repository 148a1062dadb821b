// A restarted trainer's publisher (a new Publisher on the store the old one filled) rebuilds the
// int8 view at the newest published version from the store's anchor and patches and publishes the
// next version as a patch from it — the very bytes an uninterrupted publisher makes — so a worker
// holding the old version follows with a patch. When the view cannot be rebuilt or is not this
// model's, the version is a fresh anchor and the publisher says why.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "core/error.h"
#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse/publisher.h"
#include "pulse_test_util.h"

namespace stoa::pulse {
namespace {

namespace fs = std::filesystem;
using testing::masters_of;
using testing::same_bytes;
using testing::TempDir;

// One optimiser step: N(0, 1e-4) on every weight (some int8 values move, a few groups re-scale).
void step(ModelWeights& w, std::mt19937_64& rng) {
  std::normal_distribution<float> noise(0.0f, 1e-4f);
  for (auto& [name, t] : w.tensors) {
    float* x = t.as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) x[i] += noise(rng);
  }
}

const PublisherOptions kOptions{4, RetentionPolicy{3}, {}};  // anchors at 0 and 4

// A trainer's first life: versions 0..5 published from a model that steps in between. Returns the
// view at 5 (what every worker that held 5 has).
Int8State first_life(BlobStore& store, ModelWeights& w, std::mt19937_64& rng) {
  Publisher publisher(store, kOptions);
  const Hash128 config = config_hash(w.config);
  for (uint64_t v = 0; v <= 5; ++v) {
    if (v > 0) step(w, rng);
    publisher.publish(v, config, masters_of(w));
  }
  return *publisher.current();
}

struct FirstLife {
  TempDir dir;
  BlobStore store;
  ModelWeights w;
  std::mt19937_64 rng{5};
  Int8State at5;
  explicit FirstLife(const std::string& name)
      : dir(name), store(dir.path.string()), w(random_weights(preset_config("tiny-lfm2moe"), 11)) {
    at5 = first_life(store, w, rng);
    step(w, rng);  // the masters of version 6: slightly changed
  }
};

TEST(PulsePublisherRestart, TheFirstVersionAfterARestartIsAPatchFromTheRebuiltView) {
  FirstLife run("restart");
  // The reference: a publisher that never stopped, on a store of its own.
  TempDir ref_dir("restart_reference");
  BlobStore ref_store(ref_dir.path.string());
  ModelWeights ref_w = random_weights(preset_config("tiny-lfm2moe"), 11);
  std::mt19937_64 ref_rng(5);
  Publisher reference(ref_store, kOptions);
  for (uint64_t v = 0; v <= 6; ++v) {
    if (v > 0) step(ref_w, ref_rng);
    reference.publish(v, config_hash(ref_w.config), masters_of(ref_w));
  }

  Publisher restarted(run.store, kOptions);  // as after a kill: the catalog on disk, no view
  ASSERT_EQ(restarted.current(), nullptr);
  const Published six = restarted.publish(6, config_hash(run.w.config), masters_of(run.w));
  EXPECT_EQ(six.rebuilt_from, 5u);
  EXPECT_EQ(six.fresh_grid_reason, "");
  EXPECT_FALSE(six.anchor.has_value()) << "6 is no anchor version (anchor_every 4)";
  ASSERT_TRUE(six.patch.has_value());
  EXPECT_EQ(six.patch->from_version, 5u);
  EXPECT_EQ(six.patch->to_version, 6u);
  // What a worker holding 5 does: apply the patch to its state.
  Int8State worker = run.at5;
  apply_patch(worker, decode_patch(run.store.get(six.patch->hash), patch_limits_for(worker)));
  ASSERT_NE(restarted.current(), nullptr);
  EXPECT_EQ(worker.version(), 6u);
  EXPECT_EQ(worker.state_hash(), restarted.current()->state_hash());
  EXPECT_TRUE(same_bytes(worker, *restarted.current()));
  // Byte for byte what the uninterrupted publisher made: the restart is invisible on the wire.
  ASSERT_TRUE(reference.catalog().plan(5, 6).size() == 1u);
  EXPECT_TRUE(run.store.get(six.patch->hash) ==
              ref_store.get(reference.catalog().plan(5, 6).front().hash));
  EXPECT_TRUE(same_bytes(*restarted.current(), *reference.current()));
  // The patch is small next to the anchor a fresh grid would have cost every worker.
  const uint64_t anchor_bytes = restarted.catalog().newest_anchor(6)->bytes;
  std::printf("restart: version 6 is a %llu-byte patch (the anchor at 4: %llu bytes)\n",
              static_cast<unsigned long long>(six.patch->bytes),
              static_cast<unsigned long long>(anchor_bytes));
  EXPECT_LT(six.patch->bytes, anchor_bytes);
}

// The fallback: an anchor of the masters on a fresh grid, exactly today's first version.
void expect_fresh_anchor(const Published& p, const ModelWeights& w, BlobStore& store,
                         const std::string& reason_part) {
  EXPECT_FALSE(p.rebuilt_from.has_value());
  EXPECT_FALSE(p.patch.has_value());
  ASSERT_TRUE(p.anchor.has_value());
  Int8Quantizer fresh;
  EXPECT_TRUE(store.get(p.anchor->hash) == encode_anchor(int8_view_of(w, p.version, &fresh)));
  EXPECT_NE(p.fresh_grid_reason.find(reason_part), std::string::npos) << p.fresh_grid_reason;
}

TEST(PulsePublisherRestart, APrunedBlobGivesAFreshAnchorAndSaysWhy) {
  FirstLife run("restart_pruned");
  Publisher before(run.store, kOptions);
  const CatalogEntry anchor4 = *before.catalog().newest_anchor(5);
  ASSERT_EQ(anchor4.to_version, 4u);
  ASSERT_TRUE(run.store.remove(anchor4.hash));  // e.g. deleted by hand: the route to 5 is broken
  Publisher restarted(run.store, kOptions);
  const Published six = restarted.publish(6, config_hash(run.w.config), masters_of(run.w));
  expect_fresh_anchor(six, run.w, run.store, "cannot be rebuilt from the store");
  EXPECT_NE(six.fresh_grid_reason.find("is not in the store"), std::string::npos)
      << six.fresh_grid_reason;
}

TEST(PulsePublisherRestart, ACorruptBlobGivesAFreshAnchorAndSaysWhy) {
  FirstLife run("restart_corrupt");
  Publisher before(run.store, kOptions);
  const std::vector<CatalogEntry> route = before.catalog().plan(std::nullopt, 5);
  ASSERT_EQ(route.back().kind, BlobKind::kPatch);  // 4 -> 5
  {
    // One byte flipped in the middle of the patch on disk (bit rot, a tampered file).
    const std::string path = run.store.path_of(route.back().hash);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(route.back().bytes / 2));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(static_cast<std::streamoff>(route.back().bytes / 2));
    f.write(&c, 1);
  }
  Publisher restarted(run.store, kOptions);
  const Published six = restarted.publish(6, config_hash(run.w.config), masters_of(run.w));
  expect_fresh_anchor(six, run.w, run.store, "cannot be rebuilt from the store");
}

TEST(PulsePublisherRestart, AnotherModelConfigGivesAFreshAnchorAndSaysWhy) {
  FirstLife run("restart_config");
  // The same tensors under another config (rope_theta changed): another fingerprint for workers.
  ModelConfig other = run.w.config;
  other.rope_theta *= 2;
  ASSERT_NE(config_hash(other), config_hash(run.w.config));
  Publisher restarted(run.store, kOptions);
  const Published six = restarted.publish(6, config_hash(other), masters_of(run.w));
  EXPECT_FALSE(six.rebuilt_from.has_value());
  EXPECT_FALSE(six.patch.has_value());
  ASSERT_TRUE(six.anchor.has_value());
  EXPECT_NE(six.fresh_grid_reason.find("another model config"), std::string::npos)
      << six.fresh_grid_reason;
  EXPECT_EQ(decode_anchor(run.store.get(six.anchor->hash)).config_hash(), config_hash(other));
}

TEST(PulsePublisherRestart, AModelWhoseTensorsDifferFromTheViewGivesAFreshAnchorAndSaysWhy) {
  FirstLife run("restart_tensors");
  // Under the run's config hash, a model that lacks one of the view's tensors (a build whose
  // model code changed): the rebuilt view does not fit, the masters go on a fresh grid.
  const ModelWeights& w = run.w;
  const MasterStream all_but_the_last = [&w](const MasterSink& take) {
    for (auto it = w.tensors.begin(); std::next(it) != w.tensors.end(); ++it)
      take(it->first, it->second.shape(), it->second.as<const float>());
  };
  Publisher restarted(run.store, kOptions);
  const Published six = restarted.publish(6, config_hash(run.w.config), all_but_the_last);
  EXPECT_FALSE(six.rebuilt_from.has_value());
  EXPECT_FALSE(six.patch.has_value());
  ASSERT_TRUE(six.anchor.has_value());
  EXPECT_NE(six.fresh_grid_reason.find("does not fit the model"), std::string::npos)
      << six.fresh_grid_reason;
  EXPECT_EQ(decode_anchor(run.store.get(six.anchor->hash)).size(), run.at5.size() - 1);
}

}  // namespace
}  // namespace stoa::pulse
