// The episode runner over a real tiny model, the real search task and a real BM25 index:
// episodes of one group forked from a shared prompt (one sample starting late, after a slot
// freed), beside an episode with its own prompt, must each reproduce a solo run of the same
// episode (same tokens, same behaviour log-probs, same transcript) — and the transcript and
// capacity limits end episodes as documented.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine_test_util.h"
#include "engine/pipeline_script.h"
#include "env/env_test_util.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/search_task.h"
#include "roles/episode/episode_runner.h"

namespace stoa::episode {
namespace {

struct Outcome {
  std::vector<int32_t> sampled;
  std::vector<float> logprobs;
  std::vector<int32_t> transcript;
  std::vector<uint8_t> mask;
  EpisodeEnd end = EpisodeEnd::kDone;
  int turns_seen = 0;
};

constexpr int64_t kSampleVocab = 256;  // the byte codec's ids

// One episode alone, one token per append: the loop the runner must reproduce.
Outcome solo(engine::ModelRunner& model, const env::Task& task, const env::QaItem& problem,
             const env::TokenCodec& codec, const EpisodeSampling& s, int32_t eos) {
  env::Episode ep(task, problem, codec, {2, 64});
  engine::Sampler sampler(s.params, s.seed, s.stream);
  engine::Sequence seq = model.new_sequence(4096);
  Tensor logits = model.append(seq, ep.tokens());
  Outcome out;
  std::vector<int32_t> turn;
  while (true) {
    const engine::SampledToken t =
        sampler.sample(std::span<const float>(logits.as<float>(), kSampleVocab));
    out.sampled.push_back(t.token);
    out.logprobs.push_back(t.logprob);
    turn.push_back(t.token);
    const bool end = t.token == eos || static_cast<int64_t>(turn.size()) >= s.max_new_tokens ||
                     ep.stop_position(codec.decode(turn)) != std::string::npos;
    if (!end) {
      logits = model.append(seq, std::span<const int32_t>(&t.token, 1));
      continue;
    }
    const env::Decision d = ep.step(turn);
    turn.clear();
    if (d.done) break;
    std::vector<int32_t> feed = {t.token};
    feed.insert(feed.end(), d.appended.begin(), d.appended.end());
    logits = model.append(seq, feed);
  }
  out.transcript = ep.tokens();
  out.mask = ep.loss_mask();
  return out;
}

class EpisodeRunnerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new env::testing::TempDir("episode_runner");
    env::build_bm25_index(env::testing::small_corpus(), dir_->path());
    index_ = new env::Bm25Index(dir_->path());
  }
  static void TearDownTestSuite() {
    delete index_;
    delete dir_;
  }
  static env::QaItem problem(const std::string& id, const std::string& question) {
    env::QaItem q;
    q.id = id;
    q.question = question;
    q.golden_answers = {"KRAV3"};
    return q;
  }
  // Two episodes of one group and one of its own, a late sample, on `model`, against solo runs.
  void run_group_and_late_sample(const ModelWeights& w, engine::EngineBackend& model);
  static env::testing::TempDir* dir_;
  static env::Bm25Index* index_;
};
env::testing::TempDir* EpisodeRunnerTest::dir_ = nullptr;
env::Bm25Index* EpisodeRunnerTest::index_ = nullptr;

// The same on a model cut into 2 and 3 pipeline stages (docs/design/pipeline.md): the tool's
// observations and the turns go through the head like decode tokens, bit for bit.
TEST_F(EpisodeRunnerTest, ForkedGroupAndLateSampleMatchSoloRuns) {
  const ModelWeights w = engine::testing::tiny_model("tiny-lfm2");
  for (int64_t stages : {1, 2, 3}) {
    SCOPED_TRACE("stages " + std::to_string(stages));
    ThreadPool pool(2);
    engine::ModelRunner whole =
        engine::ModelRunner::from_model(w, engine::WeightFormat::kInt8, &pool);
    engine::testing::LocalPipeline pipeline;
    if (stages > 1) pipeline = engine::testing::make_local_pipeline(w, stages);
    engine::EngineBackend& model =
        stages > 1 ? static_cast<engine::EngineBackend&>(*pipeline.head) : whole;
    run_group_and_late_sample(w, model);
  }
}

void EpisodeRunnerTest::run_group_and_late_sample(const ModelWeights& w,
                                                  engine::EngineBackend& model) {
  const env::SearchTask task(*index_, 2);
  const env::ByteCodec codec;
  const env::QaItem p0 = problem("q0", "Mutations in which gene cause Velor syndrome");
  const env::QaItem p1 = problem("q1", "What treats Melvar fever");
  const int32_t eos = static_cast<int32_t>(w.config.eos_token_id);
  auto sampling = [](uint64_t seed) {
    EpisodeSampling s;
    s.params.temperature = 1.0;
    s.params.top_k = 40;
    s.seed = seed;
    s.max_new_tokens = 12;
    return s;
  };

  RunnerLimits limits;
  limits.slots = 3;
  limits.capacity = 4096;
  limits.sample_vocab = kSampleVocab;
  if (eos >= 0) limits.stop_tokens = {eos};
  limits.preallocate = false;
  std::map<int64_t, Outcome> live;
  std::map<uint64_t, Outcome> done;  // by seed
  std::map<int64_t, uint64_t> seed_of;
  RunnerHooks hooks;
  hooks.on_token = [&](int64_t id, const engine::SampledToken& t) {
    live[id].sampled.push_back(t.token);
    live[id].logprobs.push_back(t.logprob);
  };
  hooks.on_turn = [&](int64_t id, const env::Episode&, const env::Decision&) {
    ++live[id].turns_seen;
  };
  hooks.on_end = [&](FinishedEpisode&& f) {
    Outcome r = std::move(live[f.id]);
    live.erase(f.id);
    r.transcript = f.episode->tokens();
    r.mask = f.episode->loss_mask();
    r.end = f.end;
    EXPECT_EQ(r.turns_seen, f.episode->turns());
    done[seed_of[f.id]] = std::move(r);
  };
  EpisodeRunner runner(model, codec, limits, hooks);
  auto episode = [&](const env::QaItem& q) {
    return std::make_unique<env::Episode>(task, q, codec, env::EpisodeConfig{2, 64});
  };
  const int64_t prompt = runner.add_prompt(episode(p0)->tokens());
  seed_of[runner.start(episode(p0), prompt, sampling(1))] = 1;
  seed_of[runner.start(episode(p0), prompt, sampling(2))] = 2;
  seed_of[runner.start(episode(p1), -1, sampling(3))] = 3;
  EXPECT_EQ(runner.free_slots(), 0);
  bool late_started = false;
  for (int step = 0; runner.running() > 0; ++step) {
    ASSERT_LT(step, 1000);
    runner.step();
    if (!late_started && runner.free_slots() > 0) {  // the group's last sample, late
      seed_of[runner.start(episode(p0), prompt, sampling(4))] = 4;
      runner.drop_prompt(prompt);
      late_started = true;
    }
  }
  ASSERT_TRUE(late_started);
  ASSERT_EQ(done.size(), 4u);

  ThreadPool one(1);
  engine::ModelRunner ref = engine::ModelRunner::from_model(w, engine::WeightFormat::kInt8, &one);
  for (const auto& [seed, got] : done) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Outcome want = solo(ref, task, seed == 3 ? p1 : p0, codec, sampling(seed), eos);
    EXPECT_EQ(got.end, EpisodeEnd::kDone);
    EXPECT_EQ(got.sampled, want.sampled);
    ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
    EXPECT_EQ(
        std::memcmp(got.logprobs.data(), want.logprobs.data(), got.logprobs.size() * sizeof(float)),
        0);
    EXPECT_EQ(got.transcript, want.transcript);
    EXPECT_EQ(got.mask, want.mask);
    // Every sampled token is in the transcript, generated (mask 1), in order.
    std::vector<int32_t> generated;
    for (size_t i = 0; i < got.mask.size(); ++i)
      if (got.mask[i]) generated.push_back(got.transcript[i]);
    EXPECT_EQ(generated, got.sampled);
  }
  EXPECT_NE(done[1].sampled, done[2].sampled);  // one prompt, own samplers
}

TEST_F(EpisodeRunnerTest, TranscriptBudgetTruncatesAndCapacityOverflows) {
  const ModelWeights w = engine::testing::tiny_model("tiny-qwen3");
  engine::ModelRunner model = engine::ModelRunner::from_model(w, engine::WeightFormat::kInt8);
  const env::SearchTask task(*index_, 2);
  const env::ByteCodec codec;
  const env::QaItem q = problem("q0", "Mutations in which gene cause Velor syndrome");
  auto make = [&] {
    return std::make_unique<env::Episode>(task, q, codec, env::EpisodeConfig{4, 64});
  };
  const int64_t prompt_len = static_cast<int64_t>(make()->tokens().size());
  EpisodeSampling s;
  s.params.temperature = 1.0;
  s.max_new_tokens = 16;
  for (const bool by_budget : {true, false}) {
    SCOPED_TRACE(by_budget ? "transcript budget" : "capacity");
    RunnerLimits limits;
    limits.slots = 1;
    limits.sample_vocab = kSampleVocab;
    // Room for one turn and a few tokens: the second turn's observation cannot fit.
    if (by_budget)
      limits.max_tokens = prompt_len + 20;
    else
      limits.capacity = prompt_len + 20;
    std::vector<FinishedEpisode> ended;
    int64_t sampled = 0;
    RunnerHooks hooks;
    hooks.on_token = [&](int64_t, const engine::SampledToken&) { ++sampled; };
    hooks.on_end = [&](FinishedEpisode&& f) { ended.push_back(std::move(f)); };
    EpisodeRunner runner(model, codec, limits, hooks);
    runner.start(make(), -1, s);
    while (runner.running() > 0) runner.step();
    ASSERT_EQ(ended.size(), 1u);
    const FinishedEpisode& f = ended[0];
    EXPECT_EQ(f.end, by_budget ? EpisodeEnd::kTruncated : EpisodeEnd::kOverflow);
    EXPECT_LE(sampled, 20);
    EXPECT_FALSE(f.episode->done());
    EXPECT_EQ(f.episode->turns(), 1);
  }
}

}  // namespace
}  // namespace stoa::episode
