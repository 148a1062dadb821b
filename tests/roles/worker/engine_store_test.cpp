// The engine's weights as the worker's one resident copy (EngineStore): the state read back out
// of the engine hashes bit-identically to pulse::Int8State (packed panels and row-major grid
// alike); a patch is verified off to the side and lands in the engine only at take_update (the
// generation thread's safe point); a refused patch leaves the engine untouched; a fallback
// anchor is written into the same engine in place; and a generation thread running passes
// beside the sync always sees a verified version.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "engine/engine_weights.h"
#include "model/presets.h"
#include "pulse/format.h"
#include "pulse/pulse_test_util.h"
#include "roles/worker/engine_update.h"
#include "roles/worker/engine_update_patch.h"
#include "roles/worker/memory_hub.h"
#include "roles/worker/weight_sync.h"
#include "roles/worker/weight_sync_engine.h"

namespace stoa::worker {
namespace {

using pulse::testing::same_bytes;
using testing::MemoryHub;
constexpr std::chrono::seconds kNoWait{0};

struct EngineStoreTest : ::testing::Test {
  void SetUp() override {
    config = preset_config("tiny-lfm2moe");
    chain = pulse::testing::moe_chain(6, 1e-5f);
  }
  void publish(uint64_t from, uint64_t to, std::set<uint64_t> anchors) {
    for (uint64_t v = from; v <= to; ++v)
      hub.publish(chain[v], v ? &chain[v - 1] : nullptr, anchors.count(v) != 0);
  }
  // The engine's weights read back as PULSE state.
  pulse::Int8State held(const engine::EngineWeights& e, uint64_t version) const {
    return read_state(e, chain[0].config_hash(), version);
  }
  ModelConfig config;
  std::vector<pulse::Int8State> chain;
  MemoryHub hub;
};

TEST_F(EngineStoreTest, StateReadFromTheEngineHashesLikeInt8State) {
  publish(0, 0, {0});
  WeightSync sync(hub, config);
  ASSERT_TRUE(sync.step(kNoWait));
  auto update = sync.take_update();
  ASSERT_TRUE(update && update->full && update->engine);
  EXPECT_TRUE(update->tensors.empty());
  engine::EngineWeights& e = *update->engine;
  for (engine::Backend backend : {engine::Backend::kW8A8, engine::Backend::kReference}) {
    e.set_backend(backend);  // packed panels where the target uses them, then the plain grid
    const pulse::Int8State back = held(e, 0);
    EXPECT_TRUE(same_bytes(back, chain[0]));
    EXPECT_EQ(back.state_hash(), chain[0].state_hash());
    EXPECT_EQ(back.fingerprint(), chain[0].fingerprint());
    for (const auto& [name, t] : chain[0].tensors())
      EXPECT_EQ(back.tensor_hash(name), chain[0].tensor_hash(name)) << name;
    // The verification's hash of a patched tensor, read in chunks without writing (versions 1
    // to 3 in order: rescaled groups in 3), is the result's.
    const pulse::Patch p1 = pulse::make_patch(chain[0], chain[1]);
    const pulse::Patch p2 = pulse::make_patch(chain[1], chain[3]);
    for (const pulse::TensorLayout& layout : engine_layouts(e)) {
      std::vector<const pulse::TensorPatch*> layers;
      for (const pulse::Patch* p : {&p1, &p2})
        if (const pulse::TensorPatch* tp = find_tensor_patch(*p, layout.name)) layers.push_back(tp);
      EXPECT_EQ(hash_patched_tensor(e, layout, layers), chain[3].tensor_hash(layout.name))
          << layout.name;
    }
    EXPECT_TRUE(same_bytes(held(e, 0), chain[0])) << "nothing written";
  }
  EXPECT_EQ(update->state_hash, chain[0].state_hash());
  EXPECT_TRUE(same_bytes(sync.snapshot(), chain[0]));
}

TEST_F(EngineStoreTest, PatchesAreVerifiedAsideAndLandAtTheSafePoint) {
  publish(0, 1, {0});
  WeightSync sync(hub, config);
  ASSERT_TRUE(sync.step(kNoWait));
  auto first = sync.take_update(UpdateForm::kPatches);
  ASSERT_TRUE(first && first->engine);
  std::unique_ptr<engine::EngineWeights> engine = std::move(first->engine);
  EXPECT_TRUE(same_bytes(held(*engine, 1), chain[1]));  // anchor 0 + patch 1, scattered at take

  publish(2, 4, {});  // 3 rescales groups (moe_chain)
  ASSERT_TRUE(sync.step(kNoWait));
  EXPECT_EQ(sync.version(), 4u);
  // Verified, not yet written: the generation thread keeps computing with version 1.
  EXPECT_TRUE(same_bytes(held(*engine, 1), chain[1]));
  EXPECT_TRUE(same_bytes(sync.snapshot(), chain[4]));
  auto next = sync.take_update(UpdateForm::kPatches);
  ASSERT_TRUE(next);
  EXPECT_FALSE(next->full);
  EXPECT_FALSE(next->engine);
  EXPECT_TRUE(next->patches.empty() && next->tensors.empty());
  EXPECT_EQ(next->version, 4u);
  EXPECT_EQ(next->state_hash, chain[4].state_hash());
  EXPECT_TRUE(same_bytes(held(*engine, 4), chain[4]));
  EXPECT_FALSE(sync.take_update());
  sync.detach_engine();
}

TEST_F(EngineStoreTest, ARefusedPatchLeavesTheEngineUntouched) {
  EngineStore store(config);
  testing::load_anchor(store, chain[0]);
  auto first = store.take_update(UpdateForm::kPatches);
  ASSERT_TRUE(first && first->engine);

  pulse::Patch good = pulse::make_patch(chain[0], chain[1]);
  // One value changed after the sender hashed the result: the tensor hash refuses it.
  pulse::Patch bad = good;
  for (pulse::TensorPatch& tp : bad.tensors)
    if (tp.kind == pulse::TensorKind::kInt8 && !tp.i8.empty()) {
      tp.i8[0] = static_cast<int8_t>(tp.i8[0] ^ 1);
      break;
    }
  try {
    store.apply_patch(bad);
    ADD_FAILURE() << "a patch with a wrong value was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity) << e.what();
  }
  // Another model's patch: the fingerprint.
  pulse::Patch other = good;
  other.fingerprint = Hash128{1, 2};
  EXPECT_THROW(store.apply_patch(other), Error);
  EXPECT_EQ(store.version(), 0u);
  EXPECT_FALSE(store.take_update(UpdateForm::kPatches));
  EXPECT_TRUE(same_bytes(held(*first->engine, 0), chain[0]));
  EXPECT_EQ(store.state_hash(), chain[0].state_hash());

  store.apply_patch(good);
  const auto patched = store.take_update(UpdateForm::kPatches);
  ASSERT_TRUE(patched);
  EXPECT_TRUE(same_bytes(held(*first->engine, 1), chain[1]));
  // What the engine backend is told was written (engine/backend.h): the patch's tensors.
  std::vector<std::string> patched_names;
  for (const pulse::TensorPatch& tp : good.tensors) patched_names.push_back(tp.name);
  std::sort(patched_names.begin(), patched_names.end());
  EXPECT_EQ(touched_tensors(*patched), patched_names);
  store.detach_engine();
}

TEST_F(EngineStoreTest, AFallbackAnchorIsWrittenIntoTheSameEngineInPlace) {
  publish(0, 3, {0});
  WeightSync sync(hub, config);
  ASSERT_TRUE(sync.step(kNoWait));
  auto first = sync.take_update();
  ASSERT_TRUE(first && first->engine);
  std::unique_ptr<engine::EngineWeights> engine = std::move(first->engine);
  EXPECT_TRUE(sync.engine_holds(first->version));
  publish(4, 5, {5});
  const std::string bad = hub.hash_of(pulse::BlobKind::kPatch, 3, 4);
  hub.tamper = [&](const std::string& hash, std::vector<uint8_t>& bytes) {
    if (hash == bad) bytes.resize(bytes.size() / 2);
  };
  // The warm route 3 -> 4 -> 5 is refused; the cold route is anchor 5, written in place.
  ASSERT_TRUE(sync.step(kNoWait));
  EXPECT_EQ(sync.version(), 5u);
  EXPECT_EQ(sync.counters().anchor_fallbacks, 1u);
  // The engine no longer computes with the version the generation thread took: a pass now
  // would compute with version 5 under version 3's name, so the worker takes the anchor first.
  EXPECT_FALSE(sync.engine_holds(first->version));
  auto update = sync.take_update();
  ASSERT_TRUE(update);
  EXPECT_TRUE(update->full);
  EXPECT_FALSE(update->engine) << "the runner keeps its engine; the anchor went into it";
  EXPECT_TRUE(same_bytes(held(*engine, 5), chain[5]));
  EXPECT_TRUE(sync.engine_holds(update->version));
  // Every tensor was written in place, so every one is named to the engine backend.
  std::vector<std::string> all_names;
  for (const auto& [name, t] : chain[5].tensors()) all_names.push_back(name);
  std::sort(all_names.begin(), all_names.end());
  EXPECT_EQ(touched_tensors(*update), all_names);
  sync.detach_engine();
}

TEST_F(EngineStoreTest, AnAnchorOfAnotherModelBuildsNothing) {
  publish(0, 0, {0});
  ModelConfig other = config;
  other.rms_norm_eps *= 2;  // another config hash
  WeightSync sync(hub, other);
  EXPECT_FALSE(sync.step(kNoWait));
  EXPECT_FALSE(sync.version());
  EXPECT_FALSE(sync.take_update());
  EXPECT_NE(sync.last_error().find("another model"), std::string::npos) << sync.last_error();
}

// The worker's two threads: the sync verifies patch after patch while a generation thread takes
// updates and holds the pass lock for "passes" that read the weights; every version it sees is
// bit-exact, and it ends on the last one.
TEST_F(EngineStoreTest, GenerationBesideTheSyncSeesOnlyVerifiedVersions) {
  publish(0, 0, {0});
  WeightSync sync(hub, config);
  ASSERT_TRUE(sync.step(kNoWait));
  std::atomic<bool> done{false};
  std::atomic<int> mismatches{0}, switches{0};
  std::atomic<uint64_t> last_version{0};
  std::thread generation([&] {
    std::unique_ptr<engine::EngineWeights> engine;
    uint64_t version = 0;
    while (true) {
      const bool last = done.load();
      if (auto u = sync.take_update(UpdateForm::kPatches)) {
        if (u->engine) engine = std::move(u->engine);
        version = u->version;
        ++switches;
      }
      if (engine) {
        const auto pass = sync.pass_lock();
        if (!(pulse::testing::same_bytes(held(*engine, version), chain[version]))) ++mismatches;
      }
      if (last) break;
    }
    last_version = version;
    sync.detach_engine();
  });
  for (uint64_t v = 1; v < chain.size(); ++v) {
    publish(v, v, {});
    ASSERT_TRUE(sync.step(kNoWait));
    // The first patch is taken before the next is verified (under load the generation thread
    // could otherwise sleep through every version and take only the last: one switch).
    for (int i = 0; v == 1 && switches.load() < 2 && i < 5000; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  done = true;
  generation.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GE(switches.load(), 2);
  EXPECT_EQ(last_version.load(), chain.size() - 1);
  EXPECT_FALSE(sync.version().has_value()) << "detached: the store holds no state any more";
}

}  // namespace
}  // namespace stoa::worker
