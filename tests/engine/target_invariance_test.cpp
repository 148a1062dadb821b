// One arithmetic on every kernel target (issue 19 item 2): the logits of a sequence are the same
// bits whichever SIMD target the kernels dispatch to (SCALAR, SSE4, AVX2, AVX3, AVX3_DL here),
// with 1 or 2 threads, in one prefill or token by token, alone or batched with other sequences —
// so a rollout made on one x86 machine can be replayed bit for bit on any other. Checked on every
// architecture with memcmp, not within a tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/model_runner.h"
#include "engine_test_util.h"
#include "kernels/targets.h"
#include "support/param_names.h"

namespace stoa::engine {
namespace {

using testing::random_tokens;
using testing::tiny_model;

constexpr int64_t kTokens = 20;

// Every position's logits of `tokens`, fed in one prefill (prefill = kTokens), token by token
// after a 1-token prefill (prefill = 1), or — batched — in chunks of 3 beside three other
// sequences that prefill and decode in the same passes.
std::vector<float> trace(ModelRunner& runner, const std::vector<int32_t>& tokens, int64_t prefill,
                         bool batched) {
  if (!batched) {
    Tensor t = runner.score(tokens, prefill);
    return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
  }
  const int64_t V = runner.config().vocab_size;
  Sequence target = runner.new_sequence(64);
  std::vector<Sequence> others;
  std::vector<std::vector<int32_t>> other_tokens;
  for (int i = 0; i < 3; ++i) {
    others.push_back(runner.new_sequence(64));
    other_tokens.push_back(random_tokens(kTokens, V, 300 + static_cast<uint64_t>(i)));
  }
  std::vector<float> out;
  for (int64_t at = 0; at < kTokens; at += 3) {
    const int64_t n = std::min<int64_t>(3, kTokens - at);
    std::vector<SequenceInput> inputs;
    for (size_t i = 0; i < others.size(); ++i) {
      // The others: sequence i prefills i + 2 tokens at a time, so the pass mixes shapes.
      const int64_t m = std::min<int64_t>(static_cast<int64_t>(i) + 2, kTokens - at);
      inputs.push_back(
          {&others[i], std::span<const int32_t>(other_tokens[i]).subspan(at, m), Logits::kLast});
      if (i == 0) {
        inputs.push_back({&target, std::span<const int32_t>(tokens).subspan(at, n), Logits::kAll});
      }
    }
    std::vector<Tensor> logits = runner.append_batch(inputs);
    out.insert(out.end(), logits[1].as<float>(), logits[1].as<float>() + logits[1].numel());
  }
  return out;
}

// "" when equal, else where and by how much they differ.
std::string difference(const std::vector<float>& want, const std::vector<float>& got, int64_t V) {
  if (want.size() != got.size()) return "sizes differ";
  if (std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0) return "";
  size_t differing = 0, first = want.size();
  double max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &got[i], sizeof(float)) == 0) continue;
    ++differing;
    first = std::min(first, i);
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(want[i]) - got[i]));
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "%zu of %zu logits differ, first at position %zu, max |diff| %.3g",
                differing, want.size(), first / static_cast<size_t>(V), max_diff);
  return buf;
}

class TargetInvariance : public ::testing::TestWithParam<const char*> {};

TEST_P(TargetInvariance, SameLogitBitsOnEveryTargetThreadCountBatchAndPassShape) {
  ModelWeights w = tiny_model(GetParam());
  const int64_t V = w.config.vocab_size;
  const std::vector<int32_t> tokens = random_tokens(kTokens, V, 21);
  const std::vector<int64_t> targets = kernels::available_targets();
  ASSERT_GE(targets.size(), 2u);
  std::string names;
  for (int64_t target : targets) names += " " + kernels::target_name(target);
  std::printf("[measure] %s: targets%s\n", GetParam(), names.c_str());

  std::vector<float> reference;
  std::string reference_name;
  for (int64_t target : targets) {
    // Forced before the runner is built: the weight layout (packed or grid) follows the target.
    kernels::force_target(target);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      ModelRunner runner = ModelRunner::from_model(w, WeightFormat::kInt8, &pool);
      const std::string where = kernels::target_name(target) + ", " + std::to_string(threads) +
                                (threads == 1 ? " thread" : " threads");
      for (auto [prefill, batched, shape] :
           {std::tuple{kTokens, false, "one prefill"}, std::tuple{int64_t{1}, false, "decode"},
            std::tuple{int64_t{1}, true, "batched"}}) {
        std::vector<float> got = trace(runner, tokens, prefill, batched);
        if (reference.empty()) {
          reference = std::move(got);
          reference_name = where + ", " + shape;
          continue;
        }
        const std::string diff = difference(reference, got, V);
        EXPECT_EQ(diff, "") << GetParam() << ": " << where << ", " << shape << " vs "
                            << reference_name;
      }
    }
  }
  kernels::force_target(0);
}

INSTANTIATE_TEST_SUITE_P(AllArchs, TargetInvariance,
                         ::testing::Values("tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"),
                         stoa::test::PresetParamName());

}  // namespace
}  // namespace stoa::engine
