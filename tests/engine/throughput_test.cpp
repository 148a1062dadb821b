// Reference-engine speed on bench-sized random models (label slow): prefill, single-sequence
// decode and batched decode, int8 and f32. Figures only; the fast engine (next issue) is where
// speed is a requirement. Run: ctest -L slow -R engine_throughput -V
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "engine/model_runner.h"
#include "engine_test_util.h"

namespace stoa::engine {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void measure(const char* preset, WeightFormat format) {
  ModelRunner runner = ModelRunner::from_model(random_weights(preset_config(preset), 1), format);
  const int64_t V = runner.config().vocab_size;
  std::vector<int32_t> prompt = testing::random_tokens(64, V, 1);
  Sequence seq = runner.new_sequence(128);
  double t0 = now();
  runner.append(seq, prompt);
  double prefill = now() - t0;
  t0 = now();
  const int steps = 8;
  for (int i = 0; i < steps; ++i) {
    int32_t id = static_cast<int32_t>(i);
    runner.append(seq, std::span<const int32_t>(&id, 1));
  }
  double decode = (now() - t0) / steps;
  // Eight forks decoding together: one pass reads the weights once for all of them.
  std::vector<Sequence> forks;
  for (int i = 0; i < 8; ++i) forks.push_back(seq.fork());
  std::vector<int32_t> ids(8, 3);
  std::vector<SequenceInput> inputs;
  for (int i = 0; i < 8; ++i) {
    inputs.push_back({&forks[static_cast<size_t>(i)],
                      std::span<const int32_t>(&ids[static_cast<size_t>(i)], 1), Logits::kLast});
  }
  t0 = now();
  for (int i = 0; i < 4; ++i) runner.append_batch(inputs);
  double batch = (now() - t0) / 4;
  std::printf(
      "[measure] %s %s (%d threads): prefill %.1f tok/s, decode %.1f tok/s, "
      "batch-8 decode %.1f tok/s\n",
      preset, weight_format_name(format), ThreadPool::global().size(), 64 / prefill, 1 / decode,
      8 / batch);
}

TEST(EngineThroughput, BenchModels) {
  for (const char* preset : {"bench-qwen3", "bench-lfm2moe"}) {
    measure(preset, WeightFormat::kInt8);
    measure(preset, WeightFormat::kF32);
  }
}

}  // namespace
}  // namespace stoa::engine
