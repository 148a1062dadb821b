// The libtorch policy against the engine (the project's reference forward pass, itself checked
// against llama.cpp): f32 logits on the tiny presets of all three architectures within 1e-4
// relative, and the int8 engine's distance to the f32 trainer (mean TV and KL per token,
// reported). Also: right padding and batching leave the real positions' outputs unchanged.
#include <cmath>
#include <cstdio>
#include <random>

#include <gtest/gtest.h>

#include "engine/model_runner.h"
#include "model/presets.h"
#include "train/policy_model.h"
#include "train/trainer.h"

namespace stoa::train {
namespace {

std::vector<int32_t> random_tokens(int64_t vocab, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = dist(rng);
  return out;
}

// max |a − b| over the sequence divided by max |b|: the logits' scale, so tiny logits near zero
// do not turn rounding into huge ratios.
double max_relative_difference(const Tensor& a, const Tensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::abs(double(a.as<float>()[i]) - b.as<float>()[i]));
    scale = std::max(scale, std::abs(double(b.as<float>()[i])));
  }
  return diff / scale;
}

struct Divergence {
  double tv = 0, kl = 0;
};

// Mean per-token TV(π, q) and KL(π‖q) between the softmaxes of two logit tables [T, V].
Divergence mean_divergence(const Tensor& pi_logits, const Tensor& q_logits) {
  torch::Tensor lp = torch::log_softmax(to_torch(pi_logits).to(torch::kFloat64), -1);
  torch::Tensor lq = torch::log_softmax(to_torch(q_logits).to(torch::kFloat64), -1);
  Divergence d;
  d.tv = (0.5 * (lp.exp() - lq.exp()).abs().sum(-1)).mean().item<double>();
  d.kl = (lp.exp() * (lp - lq)).sum(-1).mean().item<double>();
  return d;
}

class Parity : public ::testing::TestWithParam<const char*> {};

TEST_P(Parity, F32LogitsMatchTheEngine) {
  ModelConfig config = preset_config(GetParam());
  // std 0.1 rather than the realistic 0.02: sharper distributions make the comparison harder.
  ModelWeights weights = random_weights(config, 11, 0.1f);
  TrainOptions options;
  options.threads = 2;
  Trainer trainer(weights, options);
  std::vector<int32_t> tokens = random_tokens(config.vocab_size, 48, 5);
  Tensor ours = trainer.logits(tokens);
  auto f32 = engine::ModelRunner::from_model(weights, engine::WeightFormat::kF32);
  Tensor reference = f32.score(tokens, static_cast<int64_t>(tokens.size()));
  ASSERT_EQ(ours.shape(), reference.shape());
  const double rel = max_relative_difference(ours, reference);
  EXPECT_LE(rel, 1e-4) << GetParam();
  auto int8 = engine::ModelRunner::from_model(weights, engine::WeightFormat::kInt8);
  Tensor quantised = int8.score(tokens, static_cast<int64_t>(tokens.size()));
  Divergence d = mean_divergence(ours, quantised);
  Divergence self = mean_divergence(ours, reference);
  std::printf(
      "[parity] %s: f32 max rel diff %.3g; trainer vs f32 engine TV %.3g KL %.3g; "
      "trainer vs int8 engine mean TV %.4g KL %.4g per token\n",
      GetParam(), rel, self.tv, self.kl, d.tv, d.kl);
  EXPECT_LT(d.tv, 0.05);  // int8 is close, not equal
  EXPECT_GT(d.tv, 0.0);
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, Parity,
                         ::testing::Values("tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"));

class Padding : public ::testing::TestWithParam<const char*> {};

TEST_P(Padding, RightPaddingAndBatchingKeepRealPositions) {
  ModelConfig config = preset_config(GetParam());
  PolicyModel model(random_weights(config, 3), torch::kCPU, torch::kFloat32);
  torch::NoGradGuard no_grad;
  torch::Tensor a = torch::randint(0, config.vocab_size, {1, 20}, torch::kInt64);
  torch::Tensor b = torch::randint(0, config.vocab_size, {1, 13}, torch::kInt64);
  torch::Tensor batch = torch::zeros({2, 20}, torch::kInt64);
  batch[0] = a[0];
  batch[1].slice(0, 0, 13).copy_(b[0]);
  batch[1].slice(0, 13, 20).fill_(7);  // padding
  torch::Tensor ha = model.hidden(a), hb = model.hidden(b), hbatch = model.hidden(batch);
  EXPECT_LT((hbatch[0] - ha[0]).abs().max().item<double>(), 1e-5);
  EXPECT_LT((hbatch[1].slice(0, 0, 13) - hb[0]).abs().max().item<double>(), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, Padding,
                         ::testing::Values("tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"));

TEST(PolicyModel, WeightsRoundTripAndExpertBiasIsFrozen) {
  ModelConfig config = preset_config("tiny-lfm2moe");
  ModelWeights weights = random_weights(config, 9);
  PolicyModel model(weights, torch::kCPU, torch::kFloat32);
  ModelWeights back;
  model.copy_to(&back);
  ASSERT_EQ(back.tensors.size(), weights.tensors.size());
  for (const auto& [name, t] : weights.tensors) {
    const Tensor& u = back.tensors.at(name);
    ASSERT_EQ(u.nbytes(), t.nbytes()) << name;
    EXPECT_EQ(std::memcmp(u.data(), t.data(), t.nbytes()), 0) << name;
    const bool bias = name.find("expert_bias") != std::string::npos;
    EXPECT_EQ(model.parameter(name).requires_grad(), !bias) << name;
  }
}

TEST(PolicyModel, MissingTensorIsNamed) {
  ModelConfig config = preset_config("tiny-qwen3");
  ModelWeights weights = random_weights(config, 9);
  weights.tensors.erase("model.layers.1.self_attn.k_norm.weight");
  try {
    PolicyModel model(weights, torch::kCPU, torch::kFloat32);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1.self_attn.k_norm.weight"),
              std::string::npos)
        << e.what();
  }
}

TEST(PolicyModel, Bf16ComputeStaysClose) {
  ModelConfig config = preset_config("tiny-lfm2");
  ModelWeights weights = random_weights(config, 4);
  TrainOptions f32, bf16;
  bf16.compute_dtype = DType::kBF16;
  std::vector<int32_t> tokens = random_tokens(config.vocab_size, 32, 8);
  Tensor a = Trainer(weights, f32).logits(tokens);
  Tensor b = Trainer(weights, bf16).logits(tokens);
  Divergence d = mean_divergence(a, b);
  std::printf("[bf16] tiny-lfm2 bf16-compute vs f32: mean TV %.4g KL %.4g\n", d.tv, d.kl);
  EXPECT_LT(d.tv, 0.05);
}

}  // namespace
}  // namespace stoa::train
