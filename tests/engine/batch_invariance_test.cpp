// Batch invariance (issue 3): for a fixed seed a sequence gets the same tokens and bit-identical
// logits and log-probs whatever else shares its pass — other sequences joining and leaving,
// another sequence's multi-token tool observation in the same pass — and however many threads
// run. Checked on every architecture and every int8 backend, bit for bit (memcmp), not within a
// tolerance.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine_test_util.h"
#include "support/param_names.h"

namespace stoa::engine {
namespace {

using testing::random_tokens;
using testing::tiny_model;

struct Trace {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<float> logits;  // every step's full row
};

constexpr int64_t kSteps = 10;

// Decodes the target sequence (prompt, seed) for kSteps sampled tokens. With `crowd`, other
// sequences share each pass: a few decode alongside, one joins late, one leaves early, and one
// gets a 7-token observation appended in the middle of the run.
Trace run_target(ModelRunner& runner, const std::vector<int32_t>& prompt, bool crowd) {
  const int64_t V = runner.config().vocab_size;
  Sampler sampler({/*temperature=*/1.0, /*top_k=*/0, /*top_p=*/0.95, 0}, /*seed=*/42, 3);
  Sampler other_sampler({0.8, 20, 1.0, 0}, 7, 1);
  Sequence target = runner.new_sequence(256);
  std::vector<Sequence> others;
  std::vector<std::vector<int32_t>> other_next;
  for (int i = 0; i < 3; ++i) {
    others.push_back(runner.new_sequence(256));
    other_next.push_back(random_tokens(5 + 3 * i, V, 100 + static_cast<uint64_t>(i)));
  }
  const std::vector<int32_t> observation = random_tokens(7, V, 555);

  Trace trace;
  std::vector<int32_t> next = prompt;
  for (int64_t step = 0; step < kSteps; ++step) {
    std::vector<SequenceInput> inputs;
    std::vector<size_t> which;  // index into others, for each crowd input
    if (crowd) {
      for (size_t i = 0; i < others.size(); ++i) {
        if (i == 1 && step < 3) continue;   // joins at step 3
        if (i == 2 && step >= 6) continue;  // leaves after step 5
        std::span<const int32_t> toks = other_next[i];
        if (i == 0 && step == 4) toks = observation;  // a tool result: batched prefill
        inputs.push_back({&others[i], toks, Logits::kLast});
        which.push_back(i);
      }
    }
    // The target sits in the middle of the batch, so its rows are neither first nor last.
    inputs.insert(inputs.begin() + static_cast<long>(inputs.size() / 2),
                  SequenceInput{&target, next, Logits::kLast});
    std::vector<Tensor> out = runner.append_batch(inputs);
    size_t t_index = 0;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k].seq == &target) t_index = k;
    }
    const float* row = out[t_index].as<float>();
    trace.logits.insert(trace.logits.end(), row, row + V);
    SampledToken s = sampler.sample(std::span<const float>(row, static_cast<size_t>(V)));
    trace.tokens.push_back(s.token);
    trace.logprobs.push_back(s.logprob);
    next = {s.token};
    size_t c = 0;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k].seq == &target) continue;
      const size_t i = which[c++];
      SampledToken o =
          other_sampler.sample(std::span<const float>(out[k].as<float>(), static_cast<size_t>(V)));
      other_next[i] = {o.token};
    }
  }
  return trace;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  const char* preset;
  WeightFormat format;
  Backend backend;
};

class BatchInvariance : public ::testing::TestWithParam<Case> {};

TEST_P(BatchInvariance, SameTokensAndBitsWhateverTheBatchAndThreads) {
  const Case c = GetParam();
  ModelWeights w = tiny_model(c.preset);
  const std::vector<int32_t> prompt = random_tokens(13, w.config.vocab_size, 77);

  Trace reference;
  bool have_reference = false;
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    ModelRunner runner = ModelRunner::from_model(w, c.format, &pool);
    runner.set_backend(c.backend);
    for (bool crowd : {false, true}) {
      Trace t = run_target(runner, prompt, crowd);
      if (!have_reference) {
        reference = std::move(t);
        have_reference = true;
        continue;
      }
      EXPECT_EQ(t.tokens, reference.tokens) << threads << " threads, crowd " << crowd;
      EXPECT_TRUE(same_bits(t.logprobs, reference.logprobs))
          << threads << " threads, crowd " << crowd;
      EXPECT_TRUE(same_bits(t.logits, reference.logits)) << threads << " threads, crowd " << crowd;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllArchs, BatchInvariance,
    ::testing::Values(Case{"tiny-qwen3", WeightFormat::kInt8, Backend::kW8A8},
                      Case{"tiny-qwen3", WeightFormat::kInt8, Backend::kW8A32},
                      Case{"tiny-qwen3", WeightFormat::kInt8, Backend::kReference},
                      Case{"tiny-qwen3", WeightFormat::kF32, Backend::kW8A8},
                      Case{"tiny-lfm2", WeightFormat::kInt8, Backend::kW8A8},
                      Case{"tiny-lfm2", WeightFormat::kInt8, Backend::kW8A32},
                      Case{"tiny-lfm2moe", WeightFormat::kInt8, Backend::kW8A8},
                      Case{"tiny-lfm2moe", WeightFormat::kInt8, Backend::kW8A32}),
    [](const ::testing::TestParamInfo<Case>& param_info) {
      return stoa::test::param_name(std::string(param_info.param.preset) + "_" +
                                    weight_format_name(param_info.param.format) + "_" +
                                    backend_name(param_info.param.backend));
    });

// The fast backends stay close to the reference loops (W8A32: same weights, f32 activations;
// W8A8: plus llama.cpp's activation quantisation).
TEST(FastBackends, CloseToReference) {
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"}) {
    ModelWeights w = tiny_model(preset);
    const int64_t V = w.config.vocab_size;
    std::vector<int32_t> tokens = random_tokens(40, V, 9);
    ModelRunner runner = ModelRunner::from_model(w, WeightFormat::kInt8);
    runner.set_backend(Backend::kReference);
    Tensor ref = runner.score(tokens, 20);
    for (Backend b : {Backend::kW8A32, Backend::kW8A8}) {
      runner.set_backend(b);
      Tensor got = runner.score(tokens, 20);
      double kl = 0;
      for (int64_t t = 0; t < 40; ++t)
        kl += testing::kl_logits(ref.as<float>() + t * V, got.as<float>() + t * V, V);
      kl /= 40;
      std::printf("[measure] %s %s vs reference: mean KL %.3g, max rel |dlogit| %.3g\n", preset,
                  backend_name(b), kl, testing::max_rel_diff(ref, got));
      EXPECT_LT(kl, b == Backend::kW8A32 ? 1e-4 : 1e-2) << preset << " " << backend_name(b);
    }
  }
}

}  // namespace
}  // namespace stoa::engine
