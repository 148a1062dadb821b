// Pipeline-parallel rollouts (docs/design/pipeline.md): a model cut into K stages, each holding
// only its layers, driven by the same BatchDecoder, gives a whole machine's tokens and
// log-probs bit for bit — forks, shared prefixes, multi-turn resumes, stream and positional
// draws included. And the faults: corrupt, torn and out-of-step frames get clear errors, a dead
// link breaks the pipeline loudly, and a stage that forges its hidden states changes what the
// weights say (so a replay on one machine catches it).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

#include "core/byte_io.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/thread_pool.h"
#include "engine/batch_decoder.h"
#include "engine/pipeline_backend.h"
#include "engine/pipeline_stage.h"
#include "engine_test_util.h"
#include "model/layer_span.h"
#include "model/presets.h"
#include "pipeline_script.h"

namespace stoa::engine {
namespace {

using testing::Event;
using testing::expect_same_events;
using testing::LocalPipeline;
using testing::make_local_pipeline;
using testing::model_named;
using testing::random_tokens;
using testing::scripted_run;

// A link that can be cut or made to forge the hidden states it carries.
class TestLink final : public StageLink {
 public:
  explicit TestLink(std::unique_ptr<StageLink> inner) : inner_(std::move(inner)) {}
  uint64_t send(std::span<const uint8_t> frame) override {
    if (dead) fail(ErrorKind::kNetwork, "connection reset by peer");
    if (forge && stage_frame_kind(frame) == StageFrameKind::kPass) {
      StagePass p = decode_stage_pass(frame);
      if (!p.rows.empty()) p.rows[p.rows.size() / 2] += 0.25f;  // one value of one token
      return inner_->send(encode_stage_pass(p));
    }
    return inner_->send(frame);
  }
  std::vector<uint8_t> await(uint64_t ticket) override { return inner_->await(ticket); }
  bool dead = false;
  bool forge = false;

 private:
  std::unique_ptr<StageLink> inner_;
};

TestLink* test_link(LocalPipeline& p) {
  return static_cast<TestLink*>(p.head_link);
}

LocalPipeline make_pipeline(const ModelWeights& w, int64_t k) {
  TestLink* seen = nullptr;
  LocalPipeline p = make_local_pipeline(w, k, [&](std::unique_ptr<StageLink> next) {
    auto link = std::make_unique<TestLink>(std::move(next));
    seen = link.get();
    return link;
  });
  p.head_link = seen;
  return p;
}

TEST(Pipeline, TwoThreeAndFourStagesMatchOneMachineBitForBit) {
  for (const char* name : {"qwen3-6", "tiny-lfm2", "tiny-lfm2moe"}) {
    SCOPED_TRACE(name);
    const ModelWeights w = model_named(name);
    ThreadPool pool(2);
    ModelRunner whole = ModelRunner::from_model(w, WeightFormat::kInt8, &pool);
    const std::vector<Event> want = scripted_run(whole, w.config.vocab_size);
    ASSERT_GE(want.size(), 30u);
    for (int64_t k : {2, 3, 4}) {
      SCOPED_TRACE(k);
      LocalPipeline p = make_pipeline(w, k);
      expect_same_events(want, scripted_run(*p.head, w.config.vocab_size));
      // Every sequence the run opened was dropped on every stage.
      for (const auto& stage : p.stages) EXPECT_EQ(stage->live_sequences(), 0);
      EXPECT_GT(p.head->bytes_sent(), 0);
    }
  }
}

TEST(Pipeline, StagesHoldOnlyTheirTensors) {
  const ModelWeights w = model_named("qwen3-6");
  const EngineWeights all = EngineWeights::from_model(w, WeightFormat::kInt8);
  size_t names = 0;
  size_t bytes = 0;
  for (const LayerSpan& span : split_layers(w.config, 3)) {
    const EngineWeights part = EngineWeights::from_model(w, WeightFormat::kInt8, span);
    names += part.linears().size() + part.vectors().size();
    bytes += part.nbytes();
    for (const auto& [name, linear] : part.linears()) {
      const std::string layer_tag = "layers.";
      const size_t at = name.find(layer_tag);
      if (at == std::string::npos) continue;
      EXPECT_TRUE(span.holds_layer(std::stoll(name.substr(at + layer_tag.size())))) << name;
    }
  }
  // The untied head: every tensor is held exactly once across the stages.
  EXPECT_EQ(names, all.linears().size() + all.vectors().size());
  EXPECT_EQ(bytes, all.nbytes());
}

TEST(Pipeline, FramesRoundTripAndTheirSizeIsKnown) {
  StagePass p;
  p.pass = 7;
  p.hidden = 4;
  p.inputs = {{3, 10, Logits::kLast, {1, 2, 3}}, {9, 0, Logits::kNone, {4}}};
  SampleRequest r;
  r.input = 0;
  r.params.temperature = 0.7;
  r.params.top_p = 0.95;
  r.uniform = 0.125;
  r.vocab = 500;
  p.requests = {r, r};
  for (int i = 0; i < 16; ++i) p.rows.push_back(static_cast<float>(i) * 0.5f - 3.0f);
  const std::vector<uint8_t> bytes = encode_stage_pass(p);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), stage_pass_bytes(4, 2, 2, 4));
  const StagePass back = decode_stage_pass(bytes);
  EXPECT_EQ(back.pass, 7u);
  ASSERT_EQ(back.inputs.size(), 2u);
  EXPECT_EQ(back.inputs[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(back.inputs[1].logits, Logits::kNone);
  EXPECT_EQ(back.inputs[0].position, 10);
  EXPECT_EQ(back.requests[1].params.top_p, 0.95);
  EXPECT_EQ(back.requests[1].uniform, 0.125);
  EXPECT_EQ(back.rows, p.rows);

  StageSampled s{7, {{5, -1.5f, {{5, -1.5f}, {2, -2.0f}}}}};
  const StageSampled s2 = decode_stage_sampled(encode_stage_sampled(s));
  EXPECT_EQ(s2.tokens[0].token, 5);
  EXPECT_EQ(s2.tokens[0].top[1].logprob, -2.0f);
  EXPECT_EQ(decode_stage_error(encode_stage_error("stage gone")), "stage gone");
}

TEST(Pipeline, CorruptTornAndForeignFramesAreRefusedWithReasons) {
  StagePass p;
  p.hidden = 2;
  p.inputs = {{1, 0, Logits::kLast, {7}}};
  p.rows = {1.0f, 2.0f};
  const std::vector<uint8_t> good = encode_stage_pass(p);
  auto message_of = [](const std::vector<uint8_t>& frame) {
    try {
      (void)decode_stage_pass(frame);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  std::vector<uint8_t> flipped = good;
  flipped[20] ^= 0x10;
  EXPECT_NE(message_of(flipped).find("checksum"), std::string::npos) << message_of(flipped);
  std::vector<uint8_t> torn(good.begin(), good.end() - 3);
  EXPECT_NE(message_of(torn).find("checksum"), std::string::npos) << message_of(torn);
  EXPECT_NE(message_of({1, 2, 3}).find("at least"), std::string::npos);
  std::vector<uint8_t> foreign = good;
  foreign[0] = 'X';
  EXPECT_NE(message_of(foreign).find("magic"), std::string::npos);
  EXPECT_NE(message_of(encode_stage_done()).find("expected pass"), std::string::npos);
  // A token count far past the frame's bytes is refused before anything is allocated for it
  // (the count sits after pass, input count, seq, position and logits: byte 5 + 29).
  std::vector<uint8_t> greedy(good.begin(), good.end() - 8);
  for (int i = 0; i < 4; ++i) greedy[5 + 29 + i] = 0xff;
  ByteWriter(&greedy).u64(hash_bytes(greedy.data(), greedy.size()).low);
  EXPECT_NE(message_of(greedy).find("tokens"), std::string::npos) << message_of(greedy);
}

TEST(Pipeline, AStageAnswersBadPassesWithErrorsAndStaysUsable) {
  const ModelWeights w = model_named("qwen3-6");
  LocalPipeline p = make_pipeline(w, 2);
  PipelineStage& last = *p.stages.front();
  auto answer = [&](const std::vector<uint8_t>& frame) {
    const std::vector<uint8_t> got = last.handle(frame);
    return stage_frame_kind(got) == StageFrameKind::kError ? decode_stage_error(got)
                                                           : std::string("ok");
  };
  EXPECT_EQ(answer(encode_stage_control({StageFrameKind::kOpen, 5, 0, 32})), "ok");
  StagePass pass;
  pass.hidden = w.config.hidden_size;
  pass.inputs = {{5, 3, Logits::kLast, {1}}};  // the stage's copy holds 0 tokens, not 3
  pass.rows.assign(static_cast<size_t>(w.config.hidden_size), 0.5f);
  EXPECT_NE(answer(encode_stage_pass(pass)).find("out of step"), std::string::npos);
  pass.inputs[0].seq = 6;
  pass.inputs[0].position = 0;
  EXPECT_NE(answer(encode_stage_pass(pass)).find("no sequence 6"), std::string::npos);
  pass.inputs[0].seq = 5;
  pass.hidden = 8;
  pass.rows.resize(8);
  EXPECT_NE(answer(encode_stage_pass(pass)).find("width 8"), std::string::npos);
  pass.hidden = w.config.hidden_size;
  pass.rows.assign(static_cast<size_t>(w.config.hidden_size), 0.5f);
  SampleRequest bad;
  bad.params.top_p = 2.0;
  pass.requests = {bad};
  EXPECT_NE(answer(encode_stage_pass(pass)).find("top_p"), std::string::npos);
  // None of the refusals moved the sequence: a good pass still starts at 0.
  pass.requests = {SampleRequest{}};
  EXPECT_EQ(answer(encode_stage_pass(pass)), "ok");
  EXPECT_NE(answer(encode_stage_control({StageFrameKind::kOpen, 5, 0, 32})).find("open already"),
            std::string::npos);
  // The stage names itself in its errors.
  EXPECT_NE(answer(encode_stage_control({StageFrameKind::kFork, 9, 77, 0})).find("layers [3, 6)"),
            std::string::npos);
}

TEST(Pipeline, ADeadLinkBreaksThePipelineLoudly) {
  const ModelWeights w = model_named("tiny-lfm2");
  LocalPipeline p = make_pipeline(w, 3);
  BatchDecoder dec(*p.head, 2, 64);
  GenerateOptions o;
  o.max_tokens = 20;
  dec.start(random_tokens(5, w.config.vocab_size, 9), o);
  (void)dec.step();
  test_link(p)->dead = true;
  try {
    (void)dec.step();
    FAIL() << "a step over a dead link succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNetwork);
    EXPECT_NE(std::string(e.what()).find("connection reset"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(p.head->broken());
  // Even with the link back, the stages are out of step: the pipeline stays broken.
  test_link(p)->dead = false;
  EXPECT_THROW((void)p.head->new_state(16), Error);
}

TEST(Pipeline, AForgingStageChangesWhatTheWeightsSaySoReplayCatchesIt) {
  const ModelWeights w = model_named("tiny-lfm2");
  ThreadPool pool(2);
  ModelRunner whole = ModelRunner::from_model(w, WeightFormat::kInt8, &pool);
  const std::vector<Event> honest = scripted_run(whole, w.config.vocab_size);
  LocalPipeline p = make_pipeline(w, 2);
  test_link(p)->forge = true;
  const std::vector<Event> forged = scripted_run(*p.head, w.config.vocab_size);
  // A replay recomputes the log-probs of the tokens a rollout reports on one machine: the
  // forged pipeline's first differing log-prob (or token) is where it is caught.
  size_t differ = 0;
  for (size_t i = 0; i < std::min(honest.size(), forged.size()); ++i)
    if (honest[i].token != forged[i].token ||
        std::memcmp(&honest[i].logprob, &forged[i].logprob, sizeof(float)) != 0)
      ++differ;
  EXPECT_GT(differ, 0u);
}

TEST(Pipeline, BadShapesAreRefusedAtConstruction) {
  const ModelWeights w = model_named("qwen3-6");
  const std::vector<LayerSpan> spans = split_layers(w.config, 2);
  EXPECT_THROW(split_layers(w.config, 7), Error);
  EXPECT_THROW(check_span(w.config, LayerSpan{4, 4}), Error);
  // A stage after the head that starts at layer 0, a last stage with a next one, a head that
  // ends the model or has no link.
  auto weights_of = [&](LayerSpan s) {
    return std::make_unique<EngineWeights>(EngineWeights::from_model(w, WeightFormat::kInt8, s));
  };
  EXPECT_THROW(PipelineStage(weights_of(spans[0]), nullptr), Error);
  EXPECT_THROW(PipelineStage(weights_of(spans[1]), std::make_unique<TestLink>(nullptr)), Error);
  EXPECT_THROW(PipelineBackend(weights_of(LayerSpan{0, 6}), std::make_unique<TestLink>(nullptr)),
               Error);
  EXPECT_THROW(PipelineBackend(weights_of(spans[1]), nullptr), Error);
  // A stage's weights refuse another stage's tensor.
  EngineWeights part = EngineWeights::begin_state(w.config, spans[1]);
  try {
    part.add_state_f32("model.layers.0.input_layernorm.weight",
                       Tensor(DType::kF32, {w.config.hidden_size}));
    FAIL() << "a stage took a tensor of another stage";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not hold"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stoa::engine
