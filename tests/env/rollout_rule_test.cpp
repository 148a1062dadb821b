// The one rule for what a rollout may be (env/rollout_rule.h): every reason it gives is hit by a
// case, an honest rollout passes, and each case is refused for the reason it was made for.
#include "env/rollout_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace stoa::env {
namespace {

constexpr int64_t kVocab = 32;

// An owning rollout the cases edit; view() is what the rule reads.
struct Owned {
  std::string id = "r1";
  std::vector<int32_t> tokens{1, 2, 3, 4};
  std::vector<uint8_t> trainable{0, 0, 1, 1};
  std::vector<float> logprobs{0, 0, -0.5f, -1.0f};
  int32_t topk = 2;
  // Row t: the sampled token and a neighbour; rows of prompt tokens are never read.
  std::vector<int32_t> topk_ids{0, 0, 0, 0, 3, 9, 4, 10};
  std::vector<float> topk_logprobs{0, 0, 0, 0, -0.5f, -2.0f, -1.0f, -1.5f};
  std::optional<double> reward = 1.0;

  RolloutView view() const {
    return RolloutView{id, tokens, trainable, logprobs, topk, topk_ids, topk_logprobs, reward};
  }
};

RolloutLimits limits(std::optional<int32_t> topk = 2) {
  return RolloutLimits{kVocab, 16, topk};
}

struct Case {
  const char* name;
  const char* reason;
  std::function<void(Owned&)> edit;
  std::optional<int32_t> run_topk = 2;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"one token", "too_short",
       [](Owned& r) {
         r.tokens = {1};
         r.trainable = {0};
         r.logprobs = {0};
         r.topk_ids = {0, 0};
         r.topk_logprobs = {0, 0};
       }},
      {"over the limit", "too_long",
       [](Owned& r) {
         r.tokens.assign(17, 1);
         r.trainable.assign(17, 0);
       }},
      {"flags short", "bad_shape", [](Owned& r) { r.trainable.pop_back(); }},
      {"log-probs short", "bad_shape", [](Owned& r) { r.logprobs.pop_back(); }},
      {"flag 2", "bad_shape", [](Owned& r) { r.trainable[3] = 2; }},
      {"id past the vocabulary", "bad_token_id", [](Owned& r) { r.tokens[1] = kVocab; }},
      {"negative id", "bad_token_id", [](Owned& r) { r.tokens[0] = -1; }},
      {"first token generated", "first_token_generated",
       [](Owned& r) {
         r.trainable[0] = 1;
         r.logprobs[0] = -1;
       }},
      {"positive log-prob", "bad_logprob", [](Owned& r) { r.logprobs[2] = 0.5f; }},
      {"NaN log-prob", "bad_logprob", [](Owned& r) { r.logprobs[3] = std::nanf(""); }},
      {"infinite log-prob", "bad_logprob", [](Owned& r) { r.logprobs[3] = -INFINITY; }},
      {"nothing generated", "no_generated_tokens",
       [](Owned& r) {
         r.trainable = {0, 0, 0, 0};
       }},
      {"K not the run's", "topk_mismatch",
       [](Owned& r) {
         r.topk = 1;
         r.topk_ids = {0, 0, 3, 4};
         r.topk_logprobs = {0, 0, -0.5f, -1.0f};
       }},
      {"no K where the run asks for one", "topk_mismatch",
       [](Owned& r) {
         r.topk = 0;
         r.topk_ids.clear();
         r.topk_logprobs.clear();
       }},
      {"K past the wire's bound", "topk_mismatch", [](Owned& r) { r.topk = kMaxTopk + 1; },
       std::nullopt},
      {"negative K", "topk_mismatch", [](Owned& r) { r.topk = -1; }, std::nullopt},
      {"rows short", "bad_topk", [](Owned& r) { r.topk_ids.pop_back(); }},
      {"row id past the vocabulary", "bad_topk", [](Owned& r) { r.topk_ids[5] = kVocab; }},
      {"row log-prob positive", "bad_topk", [](Owned& r) { r.topk_logprobs[5] = 0.3f; }},
      {"row repeats an id", "bad_topk", [](Owned& r) { r.topk_ids[5] = 3; }},
      {"row lacks the sampled token", "bad_topk", [](Owned& r) { r.topk_ids[6] = 11; }},
      {"row's mass above 1", "bad_topk",
       [](Owned& r) {
         r.topk_logprobs[4] = -0.1f;
         r.topk_logprobs[5] = -0.2f;
       }},
      {"reward NaN", "bad_reward", [](Owned& r) { r.reward = std::nan(""); }},
      {"reward infinite", "bad_reward", [](Owned& r) { r.reward = INFINITY; }},
  };
  return all;
}

TEST(RolloutRule, AnHonestRolloutPasses) {
  Owned r;
  EXPECT_FALSE(check_rollout(r.view(), limits()));
  // Prompt rows are not read: anything may stand there.
  r.topk_ids[0] = -7;
  r.topk_logprobs[1] = 5.0f;
  EXPECT_FALSE(check_rollout(r.view(), limits()));
  // Without a run's K any K is taken; without a reward the reward is not checked.
  r.reward.reset();
  EXPECT_FALSE(check_rollout(r.view(), limits(std::nullopt)));
  // A positive log-prob within the tolerance is log-softmax rounding.
  r.logprobs[2] = kLogprobTolerance / 2;
  EXPECT_FALSE(check_rollout(r.view(), limits()));
  // A row's mass may exceed 1 by rounding.
  r.topk_logprobs[4] = std::log(0.6f);
  r.topk_logprobs[5] = std::log(0.4002f);
  EXPECT_FALSE(check_rollout(r.view(), limits()));
}

TEST(RolloutRule, EveryCaseIsRefusedForItsReason) {
  for (const Case& c : cases()) {
    Owned r;
    c.edit(r);
    auto refused = check_rollout(r.view(), limits(c.run_topk));
    ASSERT_TRUE(refused) << c.name;
    EXPECT_EQ(refused->reason, c.reason) << c.name << ": " << refused->detail;
    EXPECT_FALSE(refused->detail.empty()) << c.name;
  }
}

TEST(RolloutRule, EveryReasonIsHitByACase) {
  std::set<std::string> hit;
  for (const Case& c : cases()) hit.insert(c.reason);
  for (std::string_view reason : kRolloutRuleReasons) {
    EXPECT_TRUE(hit.count(std::string(reason))) << reason << " has no case";
  }
  EXPECT_EQ(hit.size(), std::size(kRolloutRuleReasons));
}

}  // namespace
}  // namespace stoa::env
