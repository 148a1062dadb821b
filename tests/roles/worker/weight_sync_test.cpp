// The worker's sync state machine against real PULSE blobs: cold start from an anchor, patch
// catch-up, in-flight update batches, and every refusal path (corrupt, truncated, wrong model,
// wrong announced hash) — the worker must never hold a state the sender did not have.
#include <gtest/gtest.h>

#include "pulse/pulse_test_util.h"
#include "roles/worker/memory_hub.h"
#include "roles/worker/weight_sync.h"

namespace stoa::worker {
namespace {

using pulse::testing::same_bytes;
using pulse::testing::sim_chain;
using testing::MemoryHub;
constexpr std::chrono::seconds kNoWait{0};

struct SyncTest : ::testing::Test {
  void SetUp() override { chain = sim_chain(6, 3e-3f); }
  // Publishes versions [from, to] with patches and anchors at the listed versions.
  void publish(uint64_t from, uint64_t to, std::set<uint64_t> anchors) {
    for (uint64_t v = from; v <= to; ++v)
      hub.publish(chain[v], v ? &chain[v - 1] : nullptr, anchors.count(v) != 0);
  }
  std::vector<pulse::Int8State> chain;
  MemoryHub hub;
};

TEST_F(SyncTest, NothingPublishedMeansNoVersion) {
  WeightSync sync(hub, std::nullopt);
  EXPECT_FALSE(sync.step(kNoWait));
  EXPECT_FALSE(sync.version());
  EXPECT_FALSE(sync.take_update());
}

TEST_F(SyncTest, ColdStartFromAnchorThenPatchesIsBitExact) {
  publish(0, 5, {0, 3});
  WeightSync sync(hub, std::nullopt);
  ASSERT_TRUE(sync.step(kNoWait));
  ASSERT_EQ(sync.version(), 5u);
  EXPECT_TRUE(same_bytes(sync.snapshot(), chain[5]));
  auto update = sync.take_update();
  ASSERT_TRUE(update);
  EXPECT_TRUE(update->full);
  EXPECT_EQ(update->version, 5u);
  EXPECT_EQ(update->tensors.size(), chain[5].size());
  EXPECT_EQ(update->state_hash, chain[5].state_hash());
  EXPECT_FALSE(sync.take_update());  // taken once
  EXPECT_EQ(sync.counters().blobs_refused, 0u);
  // The route started at the newest anchor (3), not at version 0.
  EXPECT_EQ(hub.fetches.count(hub.hash_of(pulse::BlobKind::kAnchor, 0, 0)), 0u);
}

TEST_F(SyncTest, IncrementalUpdateCarriesOnlyTouchedTensorsAndReproducesTheState) {
  publish(0, 2, {0});
  WeightSync sync(hub, std::nullopt);
  ASSERT_TRUE(sync.step(kNoWait));
  ASSERT_EQ(sync.version(), 2u);
  auto first = sync.take_update();
  ASSERT_TRUE(first && first->full);
  // What the engine holds: rebuilt from the update, then patched by the next updates.
  std::map<std::string, pulse::StateTensor> engine;
  for (auto& [name, t] : first->tensors) engine[name] = t;

  publish(3, 5, {});
  EXPECT_FALSE(sync.take_update());  // not fetched yet: the engine keeps computing with v2
  ASSERT_TRUE(sync.step(kNoWait));
  ASSERT_EQ(sync.version(), 5u);
  auto next = sync.take_update();
  ASSERT_TRUE(next);
  EXPECT_FALSE(next->full);
  EXPECT_LE(next->tensors.size(), chain[5].size());
  for (auto& [name, t] : next->tensors) engine[name] = t;
  for (const auto& [name, t] : chain[5].tensors()) {
    ASSERT_TRUE(engine.count(name)) << name;
    EXPECT_EQ(engine[name].compute_hash(), t.compute_hash()) << name;
  }
  EXPECT_FALSE(sync.step(kNoWait));  // already current
}

TEST_F(SyncTest, CorruptTransferIsRefusedAndFetchedAgain) {
  publish(0, 3, {0});
  WeightSync sync(hub, std::nullopt);
  const std::string bad = hub.hash_of(pulse::BlobKind::kPatch, 1, 2);
  hub.tamper = [&](const std::string& hash, std::vector<uint8_t>& bytes) {
    if (hash == bad && hub.fetches[hash] == 1) bytes[bytes.size() / 2] ^= 0x40;
  };
  ASSERT_TRUE(sync.step(kNoWait));
  EXPECT_EQ(sync.version(), 3u);
  EXPECT_TRUE(same_bytes(sync.snapshot(), chain[3]));
  EXPECT_EQ(sync.counters().refetches, 1u);
  EXPECT_EQ(sync.counters().anchor_fallbacks, 0u);
  EXPECT_EQ(hub.fetches[bad], 2);
}

TEST_F(SyncTest, PersistentlyTruncatedPatchFallsBackToAnAnchor) {
  // Small steps make sparse patches, so the planner's warm route is a patch, not the anchor.
  chain = sim_chain(6, 1e-6f);
  publish(0, 5, {0, 5});
  {
    const net::VersionInfo route = hub.version(4, kNoWait);
    ASSERT_EQ(route.blobs.size(), 1u);
    ASSERT_EQ(route.blobs.front().kind, "patch") << "precondition: the warm route is a patch";
  }
  const std::string bad = hub.hash_of(pulse::BlobKind::kPatch, 4, 5);
  hub.tamper = [&](const std::string& hash, std::vector<uint8_t>& bytes) {
    if (hash == bad) bytes.resize(bytes.size() / 2);
  };
  // The worker reaches version 4 from an earlier view of the hub, then meets the tampered route.
  MemoryHub early;
  for (uint64_t v = 0; v <= 4; ++v) early.publish(chain[v], v ? &chain[v - 1] : nullptr, v == 0);
  struct Switch : BlobSource {
    BlobSource* cur = nullptr;
    net::VersionInfo version(std::optional<uint64_t> a, std::chrono::seconds t) override {
      return cur->version(a, t);
    }
    std::vector<uint8_t> blob(const std::string& h) override { return cur->blob(h); }
  } source;
  source.cur = &early;
  WeightSync s(source, std::nullopt);
  ASSERT_TRUE(s.step(kNoWait));
  ASSERT_EQ(s.version(), 4u);
  (void)s.take_update();
  source.cur = &hub;
  ASSERT_TRUE(s.step(kNoWait));
  EXPECT_EQ(s.version(), 5u);
  EXPECT_TRUE(same_bytes(s.snapshot(), chain[5]));
  EXPECT_EQ(s.counters().anchor_fallbacks, 1u);
  EXPECT_GE(s.counters().blobs_refused, 2u);
  EXPECT_EQ(hub.fetches[bad], 2);  // fetched, refused, fetched again, refused
  auto update = s.take_update();
  ASSERT_TRUE(update);
  EXPECT_TRUE(update->full);  // after an anchor the engine reloads everything
  EXPECT_EQ(update->state_hash, chain[5].state_hash());
}

TEST_F(SyncTest, EverythingCorruptKeepsTheLastGoodState) {
  publish(0, 1, {0});
  WeightSync sync(hub, std::nullopt);
  ASSERT_TRUE(sync.step(kNoWait));
  ASSERT_EQ(sync.version(), 1u);
  publish(2, 3, {3});
  hub.tamper = [&](const std::string&, std::vector<uint8_t>& bytes) { bytes.back() ^= 1; };
  EXPECT_FALSE(sync.step(kNoWait));
  EXPECT_EQ(sync.version(), 1u);
  EXPECT_TRUE(same_bytes(sync.snapshot(), chain[1]));
  EXPECT_EQ(sync.counters().failed_syncs, 1u);
  EXPECT_FALSE(sync.last_error().empty());
  // Once the hub serves good bytes again the worker catches up.
  hub.tamper = nullptr;
  ASSERT_TRUE(sync.step(kNoWait));
  EXPECT_EQ(sync.version(), 3u);
  EXPECT_TRUE(same_bytes(sync.snapshot(), chain[3]));
}

TEST_F(SyncTest, FailedFallbackNeverLeavesTheWorkerFurtherBehind) {
  // Only version 0 is an anchor: the cold route is anchor 0 + patches, and the patch that
  // breaks the warm route breaks it too. The fallback must not leave the state at 0 (correct
  // but staler than the 3 it had) nor make the engine reload an unchanged anchor.
  chain = sim_chain(6, 1e-6f);
  publish(0, 3, {0});
  WeightSync sync(hub, std::nullopt);
  ASSERT_TRUE(sync.step(kNoWait));
  ASSERT_EQ(sync.version(), 3u);
  ASSERT_TRUE(sync.take_update());
  publish(4, 4, {});
  const std::string bad = hub.hash_of(pulse::BlobKind::kPatch, 3, 4);
  hub.tamper = [&](const std::string& hash, std::vector<uint8_t>& bytes) {
    if (hash == bad) bytes.back() ^= 1;
  };
  EXPECT_FALSE(sync.step(kNoWait));
  EXPECT_EQ(sync.version(), 3u);
  EXPECT_TRUE(same_bytes(sync.snapshot(), chain[3]));
  EXPECT_EQ(sync.counters().failed_syncs, 1u);
  EXPECT_FALSE(sync.take_update()) << "the engine already holds version 3: nothing to apply";
  hub.tamper = nullptr;
  ASSERT_TRUE(sync.step(kNoWait));
  EXPECT_EQ(sync.version(), 4u);
  EXPECT_TRUE(same_bytes(sync.snapshot(), chain[4]));
}

TEST_F(SyncTest, FallbackToTheAnchorAlreadyHeldReloadsNothing) {
  publish(0, 0, {0});
  WeightSync sync(hub, std::nullopt);
  ASSERT_TRUE(sync.step(kNoWait));
  ASSERT_TRUE(sync.take_update());
  publish(1, 1, {});
  const std::string bad = hub.hash_of(pulse::BlobKind::kPatch, 0, 1);
  hub.tamper = [&](const std::string& hash, std::vector<uint8_t>& bytes) {
    if (hash == bad) bytes.resize(bytes.size() / 2);
  };
  EXPECT_FALSE(sync.step(kNoWait));  // cold route = anchor 0 (held) + the broken patch
  EXPECT_EQ(sync.version(), 0u);
  EXPECT_FALSE(sync.take_update()) << "re-applying the held anchor must not reload the engine";
}

TEST_F(SyncTest, AnchorOfAnotherModelIsRefused) {
  publish(0, 0, {0});
  Hash128 other;
  ASSERT_TRUE(Hash128::parse("0123456789abcdef0123456789abcdef", &other));
  ASSERT_NE(other, chain[0].config_hash());
  WeightSync sync(hub, other);
  EXPECT_FALSE(sync.step(kNoWait));
  EXPECT_FALSE(sync.version());
  EXPECT_NE(sync.last_error().find("another model"), std::string::npos) << sync.last_error();
}

TEST_F(SyncTest, WrongAnnouncedStateHashIsRefused) {
  publish(0, 2, {0});
  hub.state_hashes[2] = chain[1].state_hash().hex();  // the hub lies about the result
  WeightSync sync(hub, std::nullopt);
  EXPECT_FALSE(sync.step(kNoWait));
  EXPECT_GE(sync.counters().failed_syncs, 1u);
  EXPECT_NE(sync.last_error().find("state hash"), std::string::npos) << sync.last_error();
}

}  // namespace
}  // namespace stoa::worker
