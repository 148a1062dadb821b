// The engine backend seam (engine/backend.h): the CPU engine through the interface computes the
// same bits as through its own API; a sequence of another backend is refused before anything
// changes; and a backend that computes from its own copy of the weights (as a GPU one would)
// sees a host write exactly when weights_written() names it — so the decode loop above the seam
// runs unchanged on it and produces the CPU engine's tokens bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/backend.h"
#include "engine/batch_decoder.h"
#include "engine/model_runner.h"
#include "engine_test_util.h"

namespace stoa::engine {
namespace {

using testing::random_tokens;
using testing::tiny_model;

// A second backend as a device one is built: the passes read a private copy of the weights
// ("device memory"); host writes reach it only through weights_written().
class MirroredBackend final : public EngineBackend {
 public:
  explicit MirroredBackend(const ModelWeights& w)
      : host_(EngineWeights::from_model(w, WeightFormat::kInt8)),
        device_(EngineWeights::from_model(w, WeightFormat::kInt8)) {}

  const char* backend_name() const override { return "mirrored"; }
  const ModelConfig& config() const override { return host_.config(); }
  EngineWeights& host_weights() override { return host_; }
  void weights_written(std::span<const std::string> names) override {
    for (const std::string& name : names) {
      ++uploads;
      device_.host_weights().set_int8(name, host_.linear(name).int8());
    }
  }
  std::unique_ptr<SequenceState> new_state(int64_t capacity) const override {
    return device_.new_state(capacity);
  }
  PassLogits forward(std::span<const BackendInput> inputs) override {
    ++passes;
    return device_.forward(inputs);
  }

  int64_t passes = 0;
  int64_t uploads = 0;

 private:
  EngineWeights host_;
  ModelRunner device_;
};

// Sampling at the default temperature: the tokens follow every logit.
std::vector<std::vector<int32_t>> decode(EngineBackend& backend, int64_t steps) {
  BatchDecoder dec(backend, 4, 96);
  GenerateOptions o;
  o.max_tokens = steps;
  o.seed = 11;
  const int64_t V = backend.config().vocab_size;
  const std::vector<int64_t> group = dec.start_group(random_tokens(9, V, 3), 3, o);
  const int64_t solo = dec.start(random_tokens(5, V, 4), o);
  std::vector<std::vector<int32_t>> out(4);
  while (dec.active() > 0)
    for (const StepEvent& e : dec.step())
      out[static_cast<size_t>(e.slot)].push_back(e.sampled.token);
  EXPECT_EQ(group.size() + 1, 4u);
  EXPECT_EQ(solo, 3);
  return out;
}

TEST(EngineBackend, CpuForwardThroughTheSeamEqualsAppendBatch) {
  const ModelWeights w = tiny_model("tiny-lfm2");
  ModelRunner runner = ModelRunner::from_model(w, WeightFormat::kInt8);
  EngineBackend& backend = runner;
  EXPECT_STREQ(backend.backend_name(), "cpu");
  const int64_t V = runner.config().vocab_size;
  const std::vector<int32_t> a = random_tokens(7, V, 1), b = random_tokens(3, V, 2);

  std::unique_ptr<SequenceState> sa = backend.new_state(32), sb = backend.new_state(32);
  const BackendInput inputs[] = {{sa.get(), a, Logits::kAll}, {sb.get(), b, Logits::kLast}};
  const PassLogits got = backend.forward(inputs);
  ASSERT_EQ(got.count(0), 7);
  ASSERT_EQ(got.count(1), 1);
  const std::vector<float> rows_a(got.rows(0).begin(), got.rows(0).end());
  const std::vector<float> last_b(got.last(1).begin(), got.last(1).end());
  EXPECT_EQ(sa->length(), 7);
  EXPECT_EQ(sb->tokens(), b);

  Sequence ra = runner.new_sequence(32), rb = runner.new_sequence(32);
  const Tensor want_a = runner.append(ra, a, Logits::kAll);
  const Tensor want_b = runner.append(rb, b, Logits::kLast);
  EXPECT_EQ(std::memcmp(rows_a.data(), want_a.as<float>(), rows_a.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(last_b.data(), want_b.as<float>(), last_b.size() * sizeof(float)), 0);

  // A fork through the seam continues exactly as the original would.
  std::unique_ptr<SequenceState> fa = sa->fork_state();
  const int32_t next = 5;
  auto step_one = [&](SequenceState* seq) {
    const BackendInput one[] = {{seq, std::span<const int32_t>(&next, 1), Logits::kLast}};
    const PassLogits l = backend.forward(one);
    return std::vector<float>(l.last(0).begin(), l.last(0).end());
  };
  const std::vector<float> from_fork = step_one(fa.get());
  const std::vector<float> from_original = step_one(sa.get());
  EXPECT_EQ(std::memcmp(from_fork.data(), from_original.data(), from_fork.size() * sizeof(float)),
            0);
}

TEST(EngineBackend, ForeignOrBadSequencesAreRefusedAndNothingAdvances) {
  const ModelWeights w = tiny_model("tiny-qwen3");
  ModelRunner runner = ModelRunner::from_model(w, WeightFormat::kInt8);
  MirroredBackend other(w);
  const int64_t V = runner.config().vocab_size;
  const std::vector<int32_t> toks = random_tokens(4, V, 9);

  std::unique_ptr<SequenceState> mine = runner.new_state(16);
  // The mirrored backend's states are Sequences too (it computes on a ModelRunner), so a truly
  // foreign state is one of a backend of another kind.
  class Foreign final : public SequenceState {
   public:
    int64_t length() const override { return 0; }
    int64_t capacity() const override { return 16; }
    const std::vector<int32_t>& tokens() const override { return none_; }
    void preallocate() override {}
    std::unique_ptr<SequenceState> fork_state() const override {
      return std::make_unique<Foreign>();
    }

   private:
    std::vector<int32_t> none_;
  } foreign;
  const BackendInput mixed[] = {{mine.get(), toks, Logits::kLast}, {&foreign, toks, Logits::kLast}};
  EXPECT_THROW(runner.forward(mixed), Error);
  EXPECT_EQ(mine->length(), 0);

  const std::vector<int32_t> too_many = random_tokens(17, V, 9);
  const BackendInput over[] = {{mine.get(), too_many, Logits::kLast}};
  EXPECT_THROW(runner.forward(over), Error);
  EXPECT_EQ(mine->length(), 0);
}

TEST(EngineBackend, DecodeLoopRunsUnchangedOnAMirroringBackendAndSeesWritesWhenNamed) {
  const ModelWeights w = tiny_model("tiny-lfm2");
  ModelRunner cpu = ModelRunner::from_model(w, WeightFormat::kInt8);
  MirroredBackend mirrored(w);
  EXPECT_EQ(decode(mirrored, 12), decode(cpu, 12));
  EXPECT_GT(mirrored.passes, 0);

  // A PULSE-like write: a few int8 values of one tensor, in the host copy of both.
  const std::string name = "model.layers.0.feed_forward.w2.weight";
  auto write = [&](EngineWeights& weights) {
    Int8Matrix m = weights.linear(name).int8();
    for (size_t i = 0; i < m.values.size(); i += 7) m.values[i] = static_cast<int8_t>(-m.values[i]);
    weights.set_int8_values(name, m.values);
  };
  write(cpu.host_weights());
  write(mirrored.host_weights());
  // Not yet named: the mirrored backend still computes with the old weights (so this test can
  // tell a backend that forgot the write from one that has it).
  EXPECT_NE(decode(mirrored, 12), decode(cpu, 12));
  const std::string names[] = {name};
  mirrored.weights_written(names);
  EXPECT_EQ(mirrored.uploads, 1);
  EXPECT_EQ(decode(mirrored, 12), decode(cpu, 12));
}

}  // namespace
}  // namespace stoa::engine
