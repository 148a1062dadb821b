// A pipeline stage's weights (docs/design/pipeline.md, "Pipeline groups"): an EngineStore of a
// span holds only its tensors, each verified against the trainer's per-tensor hashes, and keeps
// the others' hashes so that the whole-state hash still holds; it stops at the version its head
// names; a patch that lies about a tensor of another stage is refused all the same; and a
// pipeline of such stages computes the whole model's tokens with the version its head names,
// follows the head, brings it along when a stage is ahead, and refuses a pass with other weights.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include "core/error.h"
#include "engine/engine_weights.h"
#include "engine/model_runner.h"
#include "engine/pipeline_backend.h"
#include "engine/pipeline_script.h"
#include "model/layer_span.h"
#include "model/presets.h"
#include "pulse/format.h"
#include "pulse/pulse_test_util.h"
#include "roles/worker/engine_update_patch.h"
#include "roles/worker/memory_hub.h"
#include "roles/worker/stage_worker.h"
#include "roles/worker/weight_sync.h"
#include "roles/worker/weight_sync_engine.h"

namespace stoa::worker {
namespace {

using testing::MemoryHub;
constexpr std::chrono::seconds kNoWait{0};

struct StageStoreTest : ::testing::Test {
  void SetUp() override {
    config = preset_config("tiny-lfm2moe");  // 4 layers: dense, then MoE
    chain = pulse::testing::moe_chain(5, 1e-5f);
    spans = split_layers(config, 2);
  }
  void publish(uint64_t from, uint64_t to, std::set<uint64_t> anchors) {
    for (uint64_t v = from; v <= to; ++v)
      hub.publish(chain[v], v ? &chain[v - 1] : nullptr, anchors.count(v) != 0);
  }
  // Every tensor the engine holds hashes as version `v`'s does; returns their names.
  std::set<std::string> expect_version(const engine::EngineWeights& e, uint64_t v) const {
    std::set<std::string> names;
    for (const pulse::TensorLayout& layout : engine_layouts(e)) {
      EXPECT_EQ(read_state_tensor(e, layout).compute_hash(), chain[v].tensor_hash(layout.name))
          << layout.name << " at version " << v;
      names.insert(layout.name);
    }
    return names;
  }
  ModelConfig config;
  std::vector<pulse::Int8State> chain;
  std::vector<LayerSpan> spans;
  MemoryHub hub;
};

TEST_F(StageStoreTest, EachStageHoldsItsSpanAndTheWholeStateHashHolds) {
  publish(0, 4, {0});
  std::set<std::string> covered;
  for (const LayerSpan& span : spans) {
    WeightSync sync(hub, config, span);
    ASSERT_TRUE(sync.step(kNoWait));
    EXPECT_EQ(sync.version(), 4u);
    auto update = sync.take_update();
    ASSERT_TRUE(update && update->engine);
    EXPECT_EQ(update->engine->span(), span);
    EXPECT_EQ(update->version, 4u);
    EXPECT_EQ(update->state_hash, chain[4].state_hash());  // the trainer's, whole
    const std::set<std::string> held = expect_version(*update->engine, 4);
    EXPECT_EQ(held.size(), span_tensor_slots(config, span).size());
    // Once each, but a tied head's last stage also holds the embedding table (layer_span.h).
    for (const std::string& name : held)
      EXPECT_TRUE(covered.insert(name).second ||
                  (config.tie_word_embeddings && name == "model.embed_tokens.weight"))
          << name;
    EXPECT_THROW((void)sync.snapshot(), Error);  // a stage has no whole state to copy
    sync.detach_engine();
  }
  EXPECT_EQ(covered.size(), chain[4].tensors().size());  // the stages hold every tensor once
}

TEST_F(StageStoreTest, TakesUpdatesOnlyAsFarAsTheVersionNamed) {
  publish(0, 1, {0});
  WeightSync sync(hub, config, spans[1]);
  ASSERT_TRUE(sync.step(kNoWait));
  auto first = sync.take_update_through(0);  // the anchor: the engine is built at version 0
  ASSERT_TRUE(first && first->engine);
  std::unique_ptr<engine::EngineWeights> engine = std::move(first->engine);
  EXPECT_EQ(first->version, 0u);
  EXPECT_EQ(sync.engine_version(), 0u);
  EXPECT_EQ(sync.version(), 1u);  // verified, waiting
  expect_version(*engine, 0);

  publish(2, 3, {});
  ASSERT_TRUE(sync.step(kNoWait));
  auto to2 = sync.take_update_through(2);
  ASSERT_TRUE(to2);
  EXPECT_EQ(to2->version, 2u);
  EXPECT_EQ(to2->state_hash, chain[2].state_hash());
  EXPECT_EQ(sync.engine_version(), 2u);
  expect_version(*engine, 2);
  EXPECT_FALSE(sync.take_update_through(2));  // nothing more up to 2
  auto rest = sync.take_update_through(10);
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->version, 3u);
  expect_version(*engine, 3);
  sync.detach_engine();
}

TEST_F(StageStoreTest, APatchLyingAboutAnotherStagesTensorIsRefused) {
  EngineStore store(config, spans[0]);
  testing::load_anchor(store, chain[0]);
  auto first = store.take_update(UpdateForm::kPatches);
  ASSERT_TRUE(first && first->engine);

  const pulse::Patch good = pulse::make_patch(chain[0], chain[1]);
  const std::set<std::string> mine = [&] {
    std::set<std::string> names;
    for (const TensorSlot& slot : span_tensor_slots(config, spans[0])) names.insert(slot.name);
    return names;
  }();
  // The stage cannot read another stage's tensor, but its stated hash must still combine into
  // the trainer's whole-state hash.
  pulse::Patch lying = good;
  bool changed = false;
  for (pulse::TensorPatch& tp : lying.tensors)
    if (!mine.count(tp.name)) {
      tp.result_hash.low ^= 1;
      changed = true;
      break;
    }
  ASSERT_TRUE(changed) << "the patch touches a tensor of the other stage";
  try {
    store.apply_patch(lying);
    ADD_FAILURE() << "a patch with a forged hash of another stage's tensor was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity) << e.what();
  }
  EXPECT_EQ(store.version(), 0u);
  store.apply_patch(good);
  ASSERT_TRUE(store.take_update(UpdateForm::kPatches));
  expect_version(*first->engine, 1);
  EXPECT_EQ(store.state_hash(), chain[1].state_hash());
  store.detach_engine();
}

TEST_F(StageStoreTest, APipelineOfSyncedStagesComputesWithTheVersionItsHeadNames) {
  publish(0, 3, {0});
  WeightSync head_sync(hub, config, spans[0]);
  WeightSync stage_sync(hub, config, spans[1]);
  ASSERT_TRUE(head_sync.step(kNoWait));
  ASSERT_TRUE(stage_sync.step(kNoWait));
  auto head_update = head_sync.take_update_through(2);
  auto stage_update = stage_sync.take_update_through(0);
  ASSERT_TRUE(head_update && head_update->engine && stage_update && stage_update->engine);
  ThreadPool pool(2);
  auto stage =
      std::make_unique<engine::PipelineStage>(std::move(stage_update->engine), nullptr, &pool);
  SyncedStageWeights stage_weights(stage_sync, 1);
  stage->set_weights_source(&stage_weights);
  engine::PipelineBackend head(std::move(head_update->engine),
                               std::make_unique<engine::LocalStageLink>(*stage), &pool);

  // The stage is brought from 0 to the head's 2, and the pipeline's tokens are the whole
  // model's at version 2.
  EXPECT_EQ(head.use_weights(2), 2u);
  EXPECT_EQ(stage_sync.engine_version(), 2u);
  MemoryHub upto2;
  for (uint64_t v = 0; v <= 2; ++v) upto2.publish(chain[v], v ? &chain[v - 1] : nullptr, v == 0);
  WeightSync whole_sync(upto2, config);
  ASSERT_TRUE(whole_sync.step(kNoWait));
  auto whole_update = whole_sync.take_update();
  ASSERT_TRUE(whole_update && whole_update->engine);
  engine::ModelRunner whole(std::move(whole_update->engine), &pool);
  engine::testing::expect_same_events(engine::testing::scripted_run(whole, config.vocab_size),
                                      engine::testing::scripted_run(head, config.vocab_size));

  // The stage's engine moves on without the head (as an anchor written in place does): its
  // next pass is refused, and the pipeline is broken rather than computing with a mix.
  ASSERT_TRUE(stage_sync.take_update_through(3));
  EXPECT_THROW(engine::testing::scripted_run(head, config.vocab_size), Error);
  EXPECT_TRUE(head.broken());

  // Reconnected, the head names 2 and hears 3: it must catch up before its next pass.
  stage->reset();
  head.reconnect(std::make_unique<engine::LocalStageLink>(*stage));
  EXPECT_FALSE(head.broken());
  EXPECT_EQ(head.use_weights(2), 3u);
  // A version the stage's sync never verifies: the stage gives up after its wait, saying so.
  try {
    (void)head.use_weights(7);
    ADD_FAILURE() << "a stage claimed a version it never verified";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not the head's 7"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(head.broken());
  whole_sync.detach_engine();
  stage_sync.detach_engine();
  head_sync.detach_engine();
}

}  // namespace
}  // namespace stoa::worker
