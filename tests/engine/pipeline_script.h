// The scripted run the pipeline tests compare backends with: every decoder feature a rollout
// uses, recorded event by event, so a whole machine's run and a pipeline's can be compared bit
// for bit (tests/engine/pipeline_test.cpp in one process, tests/roles/pipeline over TCP).
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/batch_decoder.h"
#include "engine/pipeline_backend.h"
#include "engine/pipeline_stage.h"
#include "engine_test_util.h"
#include "model/layer_span.h"
#include "model/presets.h"

namespace stoa::engine::testing {

// K stages in one process: the head backend and the stages after it, each on its own pool,
// linked by LocalStageLinks (frames still encoded and decoded). `wrap` may put a link of its
// own between the head and the first stage.
struct LocalPipeline {
  std::vector<std::unique_ptr<ThreadPool>> pools;
  std::vector<std::unique_ptr<PipelineStage>> stages;  // stages 1..K-1, last first
  StageLink* head_link = nullptr;                      // set by a wrapping caller
  std::unique_ptr<PipelineBackend> head;
};

using LinkWrap = std::function<std::unique_ptr<StageLink>(std::unique_ptr<StageLink>)>;

inline LocalPipeline make_local_pipeline(const ModelWeights& w, int64_t k, LinkWrap wrap = {}) {
  LocalPipeline p;
  const std::vector<LayerSpan> spans = split_layers(w.config, k);
  std::unique_ptr<StageLink> next;
  for (int64_t s = k - 1; s >= 1; --s) {
    p.pools.push_back(std::make_unique<ThreadPool>(2));
    auto weights = std::make_unique<EngineWeights>(
        EngineWeights::from_model(w, WeightFormat::kInt8, spans[static_cast<size_t>(s)]));
    p.stages.push_back(
        std::make_unique<PipelineStage>(std::move(weights), std::move(next), p.pools.back().get()));
    next = std::make_unique<LocalStageLink>(*p.stages.back());
  }
  if (wrap) next = wrap(std::move(next));
  p.pools.push_back(std::make_unique<ThreadPool>(2));
  p.head = std::make_unique<PipelineBackend>(
      std::make_unique<EngineWeights>(EngineWeights::from_model(w, WeightFormat::kInt8, spans[0])),
      std::move(next), p.pools.back().get());
  return p;
}

// Every event of a scripted run: slots joining, a group forked from one prompt pass, a shared
// prefix forked later, a turn paused early and resumed with an observation, stream and
// positional draws, top log-probs.
struct Event {
  int64_t slot;
  int32_t token;
  float logprob;
  std::vector<TokenLogprob> top;
  bool finished;
};

// `salt` varies the prompts and seeds (concurrent decoders doing different work).
inline std::vector<Event> scripted_run(EngineBackend& backend, int64_t vocab, uint64_t salt = 0) {
  const std::vector<int32_t> prompt_a = random_tokens(9, vocab, 1 + salt * 10);
  const std::vector<int32_t> prompt_b = random_tokens(14, vocab, 2 + salt * 10);
  const std::vector<int32_t> prompt_c = random_tokens(11, vocab, 4 + salt * 10);
  const std::vector<int32_t> obs = random_tokens(6, vocab, 3 + salt * 10);
  GenerateOptions oa;
  oa.max_tokens = 6;
  oa.seed = 11 + salt;
  oa.sampling.temperature = 0.9;
  oa.sampling.top_logprobs = 3;
  GenerateOptions ob;
  ob.max_tokens = 5;
  ob.seed = 22 + salt;
  ob.stream = 10;
  ob.sampling.top_p = 0.9;
  GenerateOptions oc;
  oc.max_tokens = 4;
  oc.seed = 33 + salt;
  oc.draw = DrawMode::kPositional;
  oc.sampling.top_k = 40;

  BatchDecoder dec(backend, 8, 96);
  dec.set_sample_vocab(vocab - 7);  // a padded table's tail is never drawn
  std::vector<Event> events;
  const int64_t a = dec.start(prompt_a, oa);
  int64_t prefix = -1;
  bool resumed = false;
  for (int step = 0; dec.active() > 0 || !resumed || step < 6; ++step) {
    EXPECT_LT(step, 100);
    if (step >= 100) break;
    if (step == 1) dec.start_group(prompt_b, 3, ob);
    if (step == 2) prefix = dec.add_prefix(prompt_c);
    if (step == 3 || step == 5) {
      GenerateOptions o = oc;
      o.seed += static_cast<uint64_t>(step);
      dec.start_from_prefix(prefix, o);
    }
    if (step == 6) dec.drop_prefix(prefix);
    if (step == 3 && !dec.is_paused(a)) dec.pause(a);
    if (dec.is_paused(a) && !resumed) {
      GenerateOptions again = oa;
      again.max_tokens = 4;
      dec.resume(a, obs, again);
      resumed = true;
    }
    for (const StepEvent& e : dec.step())
      events.push_back({e.slot, e.sampled.token, e.sampled.logprob, e.sampled.top, e.finished});
  }
  for (int64_t s = 0; s < dec.slots(); ++s)
    if (!dec.is_free(s)) dec.discard(s);
  return events;
}

inline void expect_same_events(const std::vector<Event>& want, const std::vector<Event>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(want[i].slot, got[i].slot);
    EXPECT_EQ(want[i].token, got[i].token);
    EXPECT_EQ(std::memcmp(&want[i].logprob, &got[i].logprob, sizeof(float)), 0);
    ASSERT_EQ(want[i].top.size(), got[i].top.size());
    for (size_t j = 0; j < want[i].top.size(); ++j) {
      EXPECT_EQ(want[i].top[j].token, got[i].top[j].token);
      EXPECT_EQ(std::memcmp(&want[i].top[j].logprob, &got[i].top[j].logprob, sizeof(float)), 0);
    }
    EXPECT_EQ(want[i].finished, got[i].finished);
  }
}

inline ModelWeights model_named(const std::string& name) {
  if (name == "qwen3-6") {  // tiny-qwen3's shape with 6 layers, so 4 stages have work
    return random_weights(qwen3_config(512, 96, 192, 6, 4, 2, 16, false), 5, 0.08f);
  }
  return tiny_model(name);
}

}  // namespace stoa::engine::testing
