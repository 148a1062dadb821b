// Blame through the hub's replay (ReplayValidator::check): a worker's rollout, given the
// commitments of a three-stage group, fails the model check when its head forges a log-prob and
// the verdict names the stage that lied — the head when every stage agrees with the replay, a
// middle stage whose rows differ — and the hub's audit keeps the stage. The digests the replay
// recomputes are those of a group of stage engines bit for bit (blame_test.cpp).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "model/layer_span.h"
#include "roles/episode/pulse_weights.h"
#include "roles/verify/replay_blame.h"
#include "roles/verify/replay_fixture.h"

namespace stoa::verify {
namespace {

using testing::attack_point;
using testing::first_generated;
using testing::Worker;

class BlameReplayTest : public testing::ReplayFixture {
 protected:
  // The chain an honest group of three stages commits to for `m`: the replay's own digests, on
  // engines built from the published states as the replay builds them.
  std::vector<StageCommitment> honest_chain(const net::RolloutSubmission& m, size_t prompt_length) {
    std::map<uint64_t, std::unique_ptr<engine::ModelRunner>> runners;
    for (uint64_t v : {1u, 2u}) {
      const pulse::Int8State& s = states->at(v);
      runners.emplace(
          v, std::make_unique<engine::ModelRunner>(
                 std::make_unique<engine::EngineWeights>(episode::engine_weights_from_state(
                     config, {s.tensors().begin(), s.tensors().end()}))));
    }
    const std::vector<LayerSpan> spans = split_layers(config, 3);
    const std::vector<int64_t> ends = {spans[0].last, spans[1].last};
    BlameSampling sampling;
    sampling.params.temperature = replay_settings.sampling.temperature;
    sampling.params.top_p = replay_settings.sampling.top_p;
    sampling.params.top_k = replay_settings.sampling.top_k;
    sampling.params.top_logprobs = m.topk;
    sampling.sample_vocab = replay_settings.sample_vocab;
    const std::optional<ReplayPositions> at = replay_positions(m, prompt_length);
    EXPECT_TRUE(at.has_value());
    const ReplayedDigests d = replay_stage_digests(
        m, *at, ends, sampling, [&](uint64_t v) -> engine::ModelRunner& { return *runners.at(v); });
    std::vector<StageCommitment> chain(3);
    for (int s = 0; s < 3; ++s) {
      chain[s].stage = s;
      chain[s].end_layer = spans[static_cast<size_t>(s)].last;
      chain[s].rows = d.rows;
      if (s > 0) chain[s].in = d.boundary[static_cast<size_t>(s - 1)];
      chain[s].out = s < 2 ? d.boundary[static_cast<size_t>(s)] : d.draws_out;
    }
    chain[2].draws = d.draws;
    return chain;
  }
};

TEST_F(BlameReplayTest, AFailingPipelineRolloutNamesTheStageThatLied) {
  gs.topk = 3;  // top-K rows, as the hub's lease would ask (the last stage draws them too)
  const Worker w = join("head");
  const net::Lease l = lease(w);
  auto rollouts = generate(w, l, v1, &v2, 1);  // the weights switch after the first token
  ASSERT_FALSE(rollouts.empty());
  net::RolloutSubmission m = rollouts.front();
  ASSERT_EQ(m.topk, 3);
  const size_t prompt_length = first_generated(m);
  m.pipeline_group = 5;
  m.stage_commitments = honest_chain(m, prompt_length);

  // Honest throughout: the replay passes and blames nobody.
  Verdict v = validator->check(m, problem(l), prompt_length);
  ASSERT_TRUE(v.pass) << v.what << ": " << v.detail;
  EXPECT_EQ(v.blame_stage, -1);

  // The head submits a log-prob of its own; every stage committed to what the weights give.
  const size_t p = attack_point(m);
  m.logprobs[p] -= 0.125f;
  v = validator->check(m, problem(l), prompt_length);
  EXPECT_EQ(v.what, "logprob");
  EXPECT_EQ(v.blame_stage, 0) << v.detail;
  EXPECT_NE(v.detail.find("; blame: stage 0"), std::string::npos) << v.detail;

  // Stage 1 sent on (and committed to) other rows, which stage 2 committed to receiving.
  m.stage_commitments[1].out[7] ^= 0x40;
  m.stage_commitments[2].in = m.stage_commitments[1].out;
  v = validator->check(m, problem(l), prompt_length);
  EXPECT_EQ(v.blame_stage, 1) << v.detail;
  EXPECT_NE(v.detail.find("; blame: stage 1"), std::string::npos) << v.detail;
  // The hub's audit keeps the stage.
  EXPECT_EQ(hub::audit_verdict(v).blame_stage, 1);

  // A verdict that says nothing of the model (an observation) blames no stage.
  ASSERT_LT(p + 1, m.tokens.size());
  m.logprobs[p] += 0.125f;
  size_t obs = p;
  while (obs < m.mask.size() && m.mask[obs]) ++obs;
  if (obs < m.mask.size()) {
    m.tokens[obs] = m.tokens[obs] == 65 ? 66 : 65;
    v = validator->check(m, problem(l), prompt_length);
    EXPECT_EQ(v.what, "observation");
    EXPECT_EQ(v.blame_stage, -1);
  }
}

}  // namespace
}  // namespace stoa::verify
