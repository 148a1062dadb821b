// Blame in the replay of a pipeline group's rollout (roles/verify/replay_blame.h): a group of
// stage engines of a tiny LFM2, cut three ways, computes a rollout under two weight versions and
// commits to its rows and draws as the stages do (engine/stage_digests.h), one token per pass —
// not the replay's cut — so the replay's digests, read between the layers of whole-model engines,
// must match them bit for bit. A stage that forges the rows it sends on, or a last stage that
// commits to other draws, is the one blamed; a head that submits a broken chain or other counts,
// or anything else when every stage agrees with the replay, is.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine_test_util.h"
#include "engine/model_runner.h"
#include "engine/stage_digests.h"
#include "model/layer_span.h"
#include "net/validation_protocol.h"
#include "roles/verify/replay_blame.h"

namespace stoa::verify {
namespace {

constexpr int64_t kStages = 3;
constexpr size_t kPrompt = 6;
constexpr int64_t kSampleVocab = 200;

// How one member of the simulated group lies (stage -1: nobody).
struct Lie {
  int stage = -1;
  size_t position = 0;  // the row it forges (a middle stage) or the draw it misreports (the last)
};

class BlameTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (uint64_t version : {1u, 2u}) {
      const ModelWeights w = engine::testing::tiny_model("tiny-lfm2", 6 + version);
      config = w.config;
      whole.emplace(version,
                    std::make_unique<engine::ModelRunner>(
                        engine::EngineWeights::from_model(w, engine::WeightFormat::kInt8), &pool));
      spans = split_layers(w.config, kStages);
      for (const LayerSpan& s : spans)
        stages[version].push_back(std::make_unique<engine::ModelRunner>(
            engine::EngineWeights::from_model(w, engine::WeightFormat::kInt8, s), &pool));
    }
    sampling.params.temperature = 1.0;
    sampling.params.top_p = 0.95;
    sampling.params.top_logprobs = 3;
    sampling.sample_vocab = kSampleVocab;

    // A prompt, a turn of 5 tokens (the weights switch after its third), an observation of 3,
    // and a turn of 4 under the new weights. The tokens need not be the draws: blame compares
    // what the stages committed to, whatever the head then submitted.
    r.tokens = engine::testing::random_tokens(kPrompt + 12, kSampleVocab, 11);
    r.mask.assign(r.tokens.size(), 1);
    r.versions.assign(r.tokens.size(), 2);
    r.logprobs.assign(r.tokens.size(), -1.0f);
    for (size_t p = 0; p < kPrompt; ++p) r.mask[p] = 0;
    for (size_t p = kPrompt + 5; p < kPrompt + 8; ++p) r.mask[p] = 0;
    for (size_t p = 0; p < kPrompt + 3; ++p) r.versions[p] = 1;
    r.prompt_version = 1;
    r.seed = 0x5eed;
    r.topk = 3;
    r.pipeline_group = 77;
  }

  engine::ModelRunner& runner_for(uint64_t version) { return *whole.at(version); }
  CpuRunnerFor runners() {
    return [this](uint64_t v) -> engine::ModelRunner& { return runner_for(v); };
  }

  // The commitments of an honest group (but for `lie`), computed on stage engines one position
  // per pass: each stage hashes the rows it received and those it sends on, the last its draws.
  std::vector<StageCommitment> commit(Lie lie = {}) {
    const std::optional<ReplayPositions> at = replay_positions(r, kPrompt);
    EXPECT_TRUE(at.has_value());
    std::vector<engine::SequenceDigests> d(static_cast<size_t>(kStages));
    std::vector<engine::Sequence> seqs;
    for (int64_t s = 0; s < kStages; ++s) seqs.push_back(whole.at(1)->new_sequence(64));
    const int64_t H = config.hidden_size;
    for (size_t j = 0; j < at->last_gen; ++j) {
      const uint64_t v = at->row_version(j);
      const int32_t token = r.tokens[j];
      std::vector<float> rows;
      for (int64_t s = 0; s < kStages; ++s) {
        engine::SequenceDigests& sd = d[static_cast<size_t>(s)];
        engine::ModelRunner& stage = *stages.at(v)[static_cast<size_t>(s)];
        const engine::SequenceInput in{
            &seqs[static_cast<size_t>(s)], {&token, 1}, engine::Logits::kLast};
        if (s > 0) engine::hash_row(sd.in, v, rows);
        ++sd.rows;
        const engine::PassLogits logits =
            stage.append_batch_stage({&in, 1}, s == 0 ? nullptr : rows.data());
        if (s + 1 < kStages) {
          const std::span<const float> out = stage.pass_hidden();
          rows.assign(out.begin(), out.end());
          EXPECT_EQ(rows.size(), static_cast<size_t>(H));
          if (lie.stage == s && lie.position == j) rows[3] += 0.125f;  // sent on as committed
          engine::hash_row(sd.out, v, rows);
        } else if (r.mask[j + 1]) {
          const size_t p = j + 1;
          engine::SampledToken t =
              engine::sample_with_uniform(logits.rows(0).first(kSampleVocab), sampling.params,
                                          engine::positional_uniform(*r.seed, p));
          if (lie.stage == s && lie.position == p) t.logprob -= 0.5f;
          engine::hash_draw(sd.out, r.versions[p], t);
          ++sd.draws;
        }
      }
    }
    std::vector<StageCommitment> chain;
    for (int64_t s = 0; s < kStages; ++s)
      chain.push_back(d[static_cast<size_t>(s)].commitment(
          static_cast<int32_t>(s), spans[static_cast<size_t>(s)].last, s == 0));
    return chain;
  }

  Blame blame() { return blame_stage(r, kPrompt, config.num_layers, sampling, runners()); }

  ThreadPool pool{2};
  ModelConfig config;
  std::vector<LayerSpan> spans;
  std::map<uint64_t, std::unique_ptr<engine::ModelRunner>> whole;
  std::map<uint64_t, std::vector<std::unique_ptr<engine::ModelRunner>>> stages;
  BlameSampling sampling;
  net::RolloutSubmission r;
};

TEST_F(BlameTest, TheReplaysDigestsAreAnHonestGroupsBitForBit) {
  r.stage_commitments = commit();
  const std::optional<ReplayPositions> at = replay_positions(r, kPrompt);
  ASSERT_TRUE(at.has_value());
  const std::vector<int64_t> ends = {spans[0].last, spans[1].last};
  const ReplayedDigests got = replay_stage_digests(r, *at, ends, sampling, runners());
  EXPECT_EQ(got.rows, static_cast<int64_t>(kPrompt + 11));
  EXPECT_EQ(got.draws, 9);
  ASSERT_EQ(got.boundary.size(), 2u);
  EXPECT_EQ(got.boundary[0], r.stage_commitments[0].out);
  EXPECT_EQ(got.boundary[1], r.stage_commitments[1].out);
  EXPECT_EQ(got.draws_out, r.stage_commitments[2].out);
}

TEST_F(BlameTest, TheLayerObserverSeesEveryLayerOfAPassUntilTakenOff) {
  engine::ModelRunner& runner = runner_for(1);
  std::vector<int64_t> layers;
  std::vector<float> last;
  runner.set_layer_observer([&](int64_t done, std::span<const float> hidden) {
    layers.push_back(done);
    last.assign(hidden.begin(), hidden.end());
  });
  engine::Sequence seq = runner.new_sequence(8);
  runner.append(seq, std::span<const int32_t>(r.tokens).first(4));
  std::vector<int64_t> want;
  for (int64_t l = 1; l <= config.num_layers; ++l) want.push_back(l);
  EXPECT_EQ(layers, want);
  // After the last layer: the rows the final norm reads (a stage ending there sends them on).
  const std::span<const float> hidden = runner.pass_hidden();
  EXPECT_EQ(last, std::vector<float>(hidden.begin(), hidden.end()));
  EXPECT_EQ(last.size(), static_cast<size_t>(4 * config.hidden_size));
  runner.set_layer_observer({});
  runner.append(seq, std::span<const int32_t>(r.tokens).subspan(4, 1));
  EXPECT_EQ(layers.size(), want.size());
}

TEST_F(BlameTest, EveryStageHonestBlamesTheHead) {
  // The model check failed (a log-prob the head made up), yet every stage committed to what the
  // weights give: the head submitted something else.
  r.stage_commitments = commit();
  r.logprobs[kPrompt + 1] = -0.25f;
  const Blame b = blame();
  EXPECT_EQ(b.stage, 0) << b.reason;
  EXPECT_NE(b.reason.find("every stage"), std::string::npos) << b.reason;
}

TEST_F(BlameTest, AMiddleStageThatForgesItsRowsIsBlamed) {
  // Stage 1 sends on (and commits to) a forged row after the switch to version 2; stage 2
  // honestly commits to what it received, so the chain holds and only the replay can tell.
  r.stage_commitments = commit({1, kPrompt + 4});
  const Blame b = blame();
  EXPECT_EQ(b.stage, 1) << b.reason;
  EXPECT_NE(b.reason.find("layer " + std::to_string(spans[1].last)), std::string::npos) << b.reason;
}

TEST_F(BlameTest, TheHeadForgingItsRowsIsBlamed) {
  r.stage_commitments = commit({0, 2});  // a prompt row
  EXPECT_EQ(blame().stage, 0);
}

TEST_F(BlameTest, ALastStageThatMisreportsADrawIsBlamed) {
  r.stage_commitments = commit({kStages - 1, kPrompt + 10});
  const Blame b = blame();
  EXPECT_EQ(b.stage, kStages - 1) << b.reason;
  EXPECT_NE(b.reason.find("draws"), std::string::npos) << b.reason;
}

TEST_F(BlameTest, CountsOtherThanTheRolloutsBlameTheHead) {
  r.stage_commitments = commit({1, kPrompt + 4});  // a lying stage is not what is blamed here
  for (StageCommitment& c : r.stage_commitments) ++c.rows;
  Blame b = blame();
  EXPECT_EQ(b.stage, 0) << b.reason;
  EXPECT_NE(b.reason.find("rows"), std::string::npos) << b.reason;

  r.stage_commitments = commit({1, kPrompt + 4});
  --r.stage_commitments.back().draws;
  b = blame();
  EXPECT_EQ(b.stage, 0) << b.reason;
  EXPECT_NE(b.reason.find("draws"), std::string::npos) << b.reason;
}

TEST_F(BlameTest, ABrokenChainBlamesTheHead) {
  r.stage_commitments = commit({1, kPrompt + 4});
  r.stage_commitments[2].in[0] ^= 1;  // stage 2 received other rows than stage 1 committed to
  const Blame b = blame();
  EXPECT_EQ(b.stage, 0) << b.reason;
  EXPECT_NE(b.reason.find("chain"), std::string::npos) << b.reason;
}

TEST_F(BlameTest, NoCommitmentsNoBlame) {
  const Blame b = blame();
  EXPECT_EQ(b.stage, -1);
  EXPECT_TRUE(b.reason.empty());
}

TEST(ValidationVerdictJson, BlameStageRoundTripsAndIsBounded) {
  net::ValidationVerdict v;
  v.job_id = "j1";
  v.what = "logprob";
  v.position = 9;
  v.blame_stage = 2;
  nlohmann::json j = net::to_json(v);
  EXPECT_EQ(net::validation_verdict_from_json(j).blame_stage, 2);
  // Absent (a verdict naming no stage, or one of an earlier build): -1.
  v.blame_stage = -1;
  j = net::to_json(v);
  EXPECT_FALSE(j.contains("blame_stage"));
  EXPECT_EQ(net::validation_verdict_from_json(j).blame_stage, -1);
  j["blame_stage"] = -1;
  EXPECT_EQ(net::validation_verdict_from_json(j).blame_stage, -1);
  for (int bad : {-2, net::kMaxBlameStage + 1}) {
    j["blame_stage"] = bad;
    EXPECT_THROW(net::validation_verdict_from_json(j), Error) << bad;
  }
  j["blame_stage"] = "1";
  EXPECT_THROW(net::validation_verdict_from_json(j), Error);
}

}  // namespace
}  // namespace stoa::verify
