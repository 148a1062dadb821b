// Continuous batching: slots joining mid-run, a group sharing one prompt pass (forks), a
// multi-turn resume with a tool observation prefilled while others decode — every slot must
// produce exactly (bit for bit) what a solo run of its request produces on one thread.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/batch_decoder.h"
#include "engine_test_util.h"

namespace stoa::engine {
namespace {

using testing::random_tokens;
using testing::tiny_model;

struct Out {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
};

// A solo run: prompt, `first` tokens, then (when `obs` is non-empty) the last sampled token and
// the observation, then `second` more tokens, with one sampler throughout.
Out solo(ModelRunner& runner, const std::vector<int32_t>& prompt, const GenerateOptions& o,
         int64_t first, const std::vector<int32_t>& obs, int64_t second) {
  const int64_t V = runner.config().vocab_size;
  Sampler sampler(o.sampling, o.seed, o.stream);
  Sequence seq = runner.new_sequence(128);
  Tensor logits = runner.append(seq, prompt);
  Out out;
  auto sample_n = [&](int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      SampledToken t = sampler.sample(std::span<const float>(logits.as<float>(), V));
      out.tokens.push_back(t.token);
      out.logprobs.push_back(t.logprob);
      if (i + 1 < n) logits = runner.append(seq, std::span<const int32_t>(&t.token, 1));
    }
  };
  sample_n(first);
  if (!obs.empty()) {
    std::vector<int32_t> feed = {out.tokens.back()};
    feed.insert(feed.end(), obs.begin(), obs.end());
    logits = runner.append(seq, feed);
    sample_n(second);
  }
  return out;
}

void expect_same(const Out& a, const Out& b, const char* what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << what;
  EXPECT_EQ(std::memcmp(a.logprobs.data(), b.logprobs.data(), a.logprobs.size() * sizeof(float)), 0)
      << what;
}

TEST(BatchDecoder, ContinuousBatchingForksAndTurnsMatchSoloRuns) {
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"}) {
    SCOPED_TRACE(preset);
    ModelWeights w = tiny_model(preset);
    const int64_t V = w.config.vocab_size;
    const std::vector<int32_t> prompt_a = random_tokens(9, V, 1);
    const std::vector<int32_t> prompt_b = random_tokens(14, V, 2);
    const std::vector<int32_t> obs = random_tokens(6, V, 3);
    GenerateOptions oa;
    oa.max_tokens = 6;
    oa.seed = 11;
    oa.sampling.temperature = 0.9;
    GenerateOptions oa2 = oa;
    oa2.max_tokens = 4;
    GenerateOptions ob;
    ob.max_tokens = 5;
    ob.seed = 22;
    ob.stream = 10;
    ob.sampling.top_p = 0.9;

    ThreadPool pool(2);
    ModelRunner runner = ModelRunner::from_model(w, WeightFormat::kInt8, &pool);
    BatchDecoder dec(runner, 6, 128);
    std::map<int64_t, Out> got;
    const int64_t a = dec.start(prompt_a, oa);
    std::vector<int64_t> group;
    bool resumed = false;
    for (int step = 0; dec.active() > 0 || !resumed; ++step) {
      ASSERT_LT(step, 100);
      if (step == 2) group = dec.start_group(prompt_b, 3, ob);  // joins while A decodes
      if (dec.is_paused(a) && !resumed) {
        dec.resume(a, obs, oa2);  // prefilled beside the group's decode tokens
        resumed = true;
      }
      for (const StepEvent& e : dec.step()) {
        got[e.slot].tokens.push_back(e.sampled.token);
        got[e.slot].logprobs.push_back(e.sampled.logprob);
      }
    }
    ASSERT_EQ(group.size(), 3u);
    EXPECT_EQ(dec.sequence(a).length(), 9 + 6 + 6 + 3);  // last token not fed yet

    ThreadPool one(1);
    ModelRunner ref = ModelRunner::from_model(w, WeightFormat::kInt8, &one);
    expect_same(got[a], solo(ref, prompt_a, oa, 6, obs, 4), "slot A (two turns)");
    for (int64_t i = 0; i < 3; ++i) {
      GenerateOptions oi = ob;
      oi.stream = ob.stream + static_cast<uint64_t>(i);
      expect_same(got[group[static_cast<size_t>(i)]], solo(ref, prompt_b, oi, 5, {}, 0),
                  "group member");
    }
    // The group's members sample differently (own streams) from one shared prompt pass.
    EXPECT_NE(got[group[0]].tokens, got[group[1]].tokens);
    std::unique_ptr<SequenceState> released = dec.release(group[0]);
    EXPECT_EQ(released->length(), 14 + 4);
    EXPECT_TRUE(dec.is_free(group[0]));
  }
}

// A shared prompt computed once and forked by samples that start at different times (a worker's
// group on fewer free slots than samples), one of them ending its turn early (pause, as on a stop
// string) and taking an observation: each matches its solo run.
TEST(BatchDecoder, PrefixForksStartedLateAndPausedTurnsMatchSoloRuns) {
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2"}) {
    SCOPED_TRACE(preset);
    ModelWeights w = tiny_model(preset);
    const int64_t V = w.config.vocab_size;
    const std::vector<int32_t> prompt = random_tokens(12, V, 4);
    const std::vector<int32_t> other = random_tokens(7, V, 5);
    const std::vector<int32_t> obs = random_tokens(5, V, 6);
    GenerateOptions o;
    o.max_tokens = 5;
    o.seed = 33;
    o.sampling.temperature = 1.0;
    auto member = [&](uint64_t seed) {
      GenerateOptions m = o;
      m.seed = seed;
      return m;
    };

    ThreadPool pool(2);
    ModelRunner runner = ModelRunner::from_model(w, WeightFormat::kInt8, &pool);
    BatchDecoder dec(runner, 3, 128);
    dec.set_preallocate(false);
    std::map<int64_t, Out> got;
    const int64_t x = dec.start(other, o);  // decodes beside the prefix's prompt pass
    const int64_t prefix = dec.add_prefix(prompt);
    const int64_t a = dec.start_from_prefix(prefix, member(1));
    const int64_t b = dec.start_from_prefix(prefix, member(2));
    EXPECT_EQ(dec.active(), 3);
    int64_t c = -1;
    Out got_x;
    bool paused_a = false, resumed_a = false;
    for (int step = 0; dec.active() > 0 || c < 0; ++step) {
      ASSERT_LT(step, 100);
      if (c < 0 && dec.is_paused(x)) {  // a late sample takes the freed slot
        dec.release(x);
        got_x = std::move(got[x]);
        got.erase(x);
        c = dec.start_from_prefix(prefix, member(3));
        dec.drop_prefix(prefix);
      }
      if (paused_a && !resumed_a) {
        GenerateOptions more = o;
        more.max_tokens = 3;
        dec.resume(a, obs, more);
        resumed_a = true;
      }
      for (const StepEvent& e : dec.step()) {
        got[e.slot].tokens.push_back(e.sampled.token);
        got[e.slot].logprobs.push_back(e.sampled.logprob);
        if (e.slot == a && !paused_a && got[a].tokens.size() == 2) {
          dec.pause(a);
          paused_a = true;
        }
      }
    }
    ThreadPool one(1);
    ModelRunner ref = ModelRunner::from_model(w, WeightFormat::kInt8, &one);
    expect_same(got[a], solo(ref, prompt, member(1), 2, obs, 3), "paused and resumed fork");
    expect_same(got[b], solo(ref, prompt, member(2), 5, {}, 0), "fork started at once");
    expect_same(got[c], solo(ref, prompt, member(3), 5, {}, 0), "fork started late");
    expect_same(got_x, solo(ref, other, o, 5, {}, 0), "its own prompt, beside the prefix pass");
    EXPECT_THROW(dec.start_from_prefix(prefix, o), Error);  // dropped
  }
}

TEST(BatchDecoder, SampleVocabBoundsEveryTokenAndDiscardFreesAnySlot) {
  ModelWeights w = tiny_model("tiny-qwen3");
  ModelRunner runner = ModelRunner::from_model(w, WeightFormat::kInt8);
  BatchDecoder dec(runner, 2, 64);
  dec.set_sample_vocab(8);
  GenerateOptions o;
  o.max_tokens = 20;
  o.sampling.temperature = 1.5;
  const int64_t prefix = dec.add_prefix(random_tokens(6, w.config.vocab_size, 7));
  const int64_t a = dec.start_from_prefix(prefix, o);
  const int64_t b = dec.start_from_prefix(prefix, o);
  dec.discard(b);  // cancelled before its fork was taken
  EXPECT_TRUE(dec.is_free(b));
  int64_t n = 0;
  while (dec.active() > 0)
    for (const StepEvent& e : dec.step()) {
      EXPECT_EQ(e.slot, a);
      EXPECT_LT(e.sampled.token, 8);
      ++n;
    }
  EXPECT_EQ(n, 20);
  dec.discard(a);
  EXPECT_EQ(dec.free_slots(), 2);
  EXPECT_THROW(dec.set_sample_vocab(w.config.vocab_size + 1), Error);
}

TEST(BatchDecoder, BadRequestsAreErrors) {
  ModelWeights w = tiny_model("tiny-qwen3");
  ModelRunner runner = ModelRunner::from_model(w, WeightFormat::kInt8);
  BatchDecoder dec(runner, 2, 16);
  GenerateOptions o;
  EXPECT_THROW(dec.start({}, o), Error);
  const std::vector<int32_t> bad = {0, static_cast<int32_t>(w.config.vocab_size)};
  EXPECT_THROW(dec.start(bad, o), Error);
  const std::vector<int32_t> long_prompt(16, 1);
  EXPECT_THROW(dec.start(long_prompt, o), Error);
  const std::vector<int32_t> p = {1, 2};
  EXPECT_THROW(dec.start_group(p, 3, o), Error);  // only 2 slots
  const int64_t s = dec.start(p, o);
  EXPECT_THROW(dec.resume(s, p, o), Error);  // not paused
  EXPECT_THROW(dec.release(5), Error);
  EXPECT_EQ(dec.active(), 1);
}

}  // namespace
}  // namespace stoa::engine
