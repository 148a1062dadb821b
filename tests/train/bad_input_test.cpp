// Bad rollouts and SFT data: each is rejected with an error naming the rollout (or file:line),
// and a rejected batch never changes the trainer — the next good step is bit-identical to a
// trainer that never saw the bad one.
#include <cmath>
#include <cstring>
#include <functional>

#include <gtest/gtest.h>

#include "model/presets.h"
#include "train/sft_data.h"
#include "train/trainer.h"

namespace stoa::train {
namespace {

Rollout good_rollout(const std::string& id, double reward) {
  Rollout r;
  r.id = id;
  r.tokens = {1, 2, 3, 4, 5, 6};
  r.trainable = {0, 0, 1, 1, 0, 1};
  r.behaviour_logprobs = {0, 0, -6.0f, -6.1f, 0, -6.2f};
  r.reward = reward;
  return r;
}

std::vector<RolloutGroup> good_batch() {
  return {{"group-a", {good_rollout("a0", 1.0), good_rollout("a1", 0.0)}}};
}

bool same_bits(const ModelWeights& a, const ModelWeights& b) {
  for (const auto& [name, t] : a.tensors) {
    const Tensor& u = b.tensors.at(name);
    if (std::memcmp(t.data(), u.data(), t.nbytes()) != 0) return false;
  }
  return true;
}

struct Case {
  const char* name;
  std::function<void(Rollout&)> corrupt;
  const char* message;  // expected in the error text
};

TEST(BadRollouts, RejectedByNameAndNeverPoisonAStep) {
  const ModelConfig config = preset_config("tiny-qwen3");
  const ModelWeights init = random_weights(config, 3);
  TrainOptions options;
  options.threads = 2;
  options.optimizer.lr = 1e-3;
  const std::vector<Case> cases = {
      {"oov id", [](Rollout& r) { r.tokens[3] = 512; }, "outside the vocabulary"},
      {"negative id", [](Rollout& r) { r.tokens[1] = -1; }, "outside the vocabulary"},
      {"nan logprob", [](Rollout& r) { r.behaviour_logprobs[2] = std::nanf(""); }, "not finite"},
      {"inf logprob", [](Rollout& r) { r.behaviour_logprobs[5] = -INFINITY; }, "not finite"},
      {"positive logprob", [](Rollout& r) { r.behaviour_logprobs[3] = 0.5f; }, "positive"},
      {"short mask", [](Rollout& r) { r.trainable.pop_back(); }, "trainable flags"},
      {"long logprobs", [](Rollout& r) { r.behaviour_logprobs.push_back(-1); }, "log-probs"},
      {"first trainable", [](Rollout& r) { r.trainable[0] = 1; }, "token 0"},
      {"nothing trainable", [](Rollout& r) { r.trainable.assign(6, 0); }, "no trainable"},
      {"one token",
       [](Rollout& r) {
         r.tokens = {1};
         r.trainable = {0};
         r.behaviour_logprobs = {0};
       },
       "tokens"},
      {"topk size",
       [](Rollout& r) {
         r.topk = 2;
         r.topk_ids = {1};
         r.topk_logprobs = {-1};
       },
       "top-K"},
      {"nan reward", [](Rollout& r) { r.reward = std::nan(""); }, "reward"},
  };
  Trainer trainer(init, options);
  for (const Case& c : cases) {
    auto batch = good_batch();
    c.corrupt(batch[0].rollouts[1]);
    try {
      trainer.train_step(batch);
      ADD_FAILURE() << c.name << ": accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << c.name;
      EXPECT_NE(what.find("'a1'"), std::string::npos) << c.name << ": " << what;
      EXPECT_NE(what.find("group-a"), std::string::npos) << c.name << ": " << what;
      EXPECT_NE(what.find(c.message), std::string::npos) << c.name << ": " << what;
    }
  }
  // Empty group and empty batch.
  EXPECT_THROW(trainer.train_step({}), Error);
  try {
    trainer.train_step({{"lonely", {}}});
    ADD_FAILURE() << "empty group accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'lonely'"), std::string::npos) << e.what();
  }
  // An advantage that overflows f32 makes the loss non-finite: rejected before the optimiser.
  auto huge = good_batch();
  huge[0].rollouts[0].reward = 1e300;
  huge[0].rollouts[1].reward = -1e300;
  EXPECT_THROW(trainer.train_step(huge), Error);

  EXPECT_EQ(trainer.step_count(), 0);
  EXPECT_TRUE(same_bits(init, trainer.weights()));
  Trainer fresh(init, options);
  StepMetrics a = trainer.train_step(good_batch());
  StepMetrics b = fresh.train_step(good_batch());
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_TRUE(same_bits(trainer.weights(), fresh.weights()));
}

TEST(BadOptions, AreRejected) {
  const ModelWeights init = random_weights(preset_config("tiny-qwen3"), 3);
  TrainOptions o;
  o.optimizer.lr = -1;
  EXPECT_THROW(Trainer(init, o), Error);
  o = {};
  o.loss.kind = LossKind::kTruncatedIs;  // needs a finite cap
  EXPECT_THROW(Trainer(init, o), Error);
  o = {};
  o.device = "toaster";
  EXPECT_THROW(Trainer(init, o), Error);
  o = {};
  o.loss.kind = LossKind::kDppoTopkTv;
  Trainer t(init, o);
  try {
    t.train_step(good_batch());  // no top-K reported
    ADD_FAILURE() << "top-K loss without top-K accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'a0'"), std::string::npos) << e.what();
  }
}

TEST(BadSft, NamesFileAndLine) {
  SftDataOptions o;
  o.vocab_size = 100;
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    try {
      parse_sft_jsonl(text, "data.jsonl", o);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("{\"tokens\": [1, 2]}\n{\"tokens\": [1, 200]}\n", "data.jsonl:2");
  expect_error("{\"tokens\": [1, 2], \"mask\": [1]}\n", "mask");
  expect_error("not json\n", "data.jsonl:1");
  expect_error("{\"prompt\": \"hi\", \"completion\": \"there\"}\n", "tokenizer");
  expect_error("{\"tokens\": [1, 2], \"mask\": [0, 0]}\n", "no trained");
  expect_error("{\"foo\": 1}\n", "needs");
  expect_error("\n\n", "no SFT examples");
  const ModelConfig config = preset_config("tiny-qwen3");
  Trainer trainer(random_weights(config, 1), TrainOptions{});
  EXPECT_THROW(trainer.sft_step({{"x", {1, 600}, {0, 1}}}), Error);
  EXPECT_THROW(trainer.sft_step({{"x", {1, 2}, {0}}}), Error);
  EXPECT_EQ(trainer.step_count(), 0);
}

}  // namespace
}  // namespace stoa::train
