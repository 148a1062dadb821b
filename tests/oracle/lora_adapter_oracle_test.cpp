// A LoRA adapter in llama.cpp (label oracle): a tiny preset's weights (the parity test's, norms
// jittered) as the base GGUF (F32), random rank-4 adapters (alpha 8, B not zero) on every matrix
// llama.cpp holds as one 2-D tensor (attention, short conv, dense FFN; not the MoE experts, which
// llama.cpp stacks) written as a PEFT adapter and exported to llama.cpp's adapter GGUF by
// export_gguf_lora_adapter. llama.cpp loads base + adapter and computes W·x + (alpha/r)·B·A·x;
// Stoa's engine scores the same tokens on the merged model W + (alpha/r)·B·A. Bar: the parity
// test's F32 one, max |Δlogit| <= 2e-6 * max |logit| and top-1 agreement everywhere; the base
// alone must miss that bar (the adapter moved the logits).
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "core/error.h"
#include "engine/model_runner.h"
#include "model/gguf_lora_adapter.h"
#include "model/gguf_writer.h"
#include "model/peft_adapter.h"
#include "model/weights.h"
#include "oracle/llama_oracle.h"
#include "support/param_names.h"

namespace stoa {
namespace {

namespace fs = std::filesystem;
using namespace oracle;  // work_dir, llama_logits, compare, ... (oracle/llama_oracle.h)

constexpr int64_t kRank = 4;
constexpr double kAlpha = 8;

// Layer matrices llama.cpp adapts one 2-D tensor at a time: not the experts, not the router.
bool adaptable(const std::string& name, const Tensor& t) {
  return t.rank() == 2 && name.rfind("model.layers.", 0) == 0 &&
         name.find(".experts.") == std::string::npos &&
         name.find("feed_forward.gate.") == std::string::npos;
}

ModelWeights clone(const ModelWeights& w) {
  ModelWeights out;
  out.config = w.config;
  for (const auto& [name, t] : w.tensors) out.tensors.emplace(name, t.clone());
  return out;
}

// Random adapters on every adaptable matrix; `merged` gets W + (alpha/r)·B·A of each.
PeftAdapter random_adapter(const ModelWeights& base, ModelWeights* merged) {
  PeftAdapter adapter;
  adapter.rank = kRank;
  adapter.alpha = kAlpha;
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  const double scale = kAlpha / static_cast<double>(kRank);
  for (const auto& [name, w] : base.tensors) {
    if (!adaptable(name, w)) continue;
    const int64_t out = w.shape()[0], in = w.shape()[1];
    Tensor a(DType::kF32, {kRank, in}), b(DType::kF32, {out, kRank});
    for (int64_t k = 0; k < a.numel(); ++k) a.as<float>()[k] = normal(rng);
    for (int64_t k = 0; k < b.numel(); ++k) b.as<float>()[k] = normal(rng);
    float* m = merged->tensors.at(name).as<float>();
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double ba = 0;
        for (int64_t r = 0; r < kRank; ++r)
          ba += static_cast<double>(b.as<float>()[o * kRank + r]) * a.as<float>()[r * in + i];
        m[o * in + i] = static_cast<float>(m[o * in + i] + scale * ba);
      }
    const std::string module = name.substr(0, name.size() - std::string(".weight").size());
    adapter.tensors.emplace(module + ".lora_A.weight", std::move(a));
    adapter.tensors.emplace(module + ".lora_B.weight", std::move(b));
  }
  return adapter;
}

class LoraAdapterOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraAdapterOracle, LlamaCppWithTheAdapterComputesOurMergedModel) {
  const fs::path dir = work_dir() / ("lora_adapter_" + GetParam());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const ModelWeights base = test_weights(GetParam());
  ModelWeights merged = clone(base);
  const PeftAdapter adapter = random_adapter(base, &merged);
  write_peft_adapter((dir / "peft").string(), adapter);
  const PeftAdapter read = read_peft_adapter((dir / "peft").string());  // the file, not memory

  const std::string base_gguf = (dir / "base.gguf").string();
  const std::string adapter_gguf = (dir / "adapter.gguf").string();
  GgufExportOptions f32;
  f32.type = GgufExportType::kF32;
  export_gguf(base, base_gguf, f32);
  const GgufLoraAdapterSummary written =
      export_gguf_lora_adapter(base.config, read, adapter_gguf, "test");
  EXPECT_EQ(written.matrices * 2, read.tensors.size());

  const int64_t V = base.config.vocab_size;
  const std::vector<int32_t> tokens = random_tokens(V, 45);
  const std::vector<float> ref = llama_logits(base_gguf, tokens, kPrefill, V, adapter_gguf);
  const std::vector<float> ref_base = llama_logits(base_gguf, tokens, kPrefill, V);
  const Tensor ours =
      engine::ModelRunner::from_model(merged, engine::WeightFormat::kF32).score(tokens, kPrefill);
  const Compare c = compare(ref, ours, kTokens, V);
  const Compare without = compare(ref_base, ours, kTokens, V);
  std::printf(
      "[oracle] %-13s base + LoRA adapter (%zu matrices, r %lld) vs merged: max|dlogit| %.3e  "
      "max|logit| %.3f  ratio %.3e (bar 2e-6)  top-1 %lld/%lld; base alone vs merged: "
      "max|dlogit| %.3e\n",
      GetParam().c_str(), written.matrices, static_cast<long long>(kRank), c.max_abs_diff,
      c.max_abs_logit, c.max_abs_diff / c.max_abs_logit, static_cast<long long>(c.top1_agree),
      static_cast<long long>(kTokens), without.max_abs_diff);
  EXPECT_GT(c.max_abs_logit, 0.0);
  EXPECT_LE(c.max_abs_diff, kF32RatioBar * c.max_abs_logit)
      << "llama.cpp with the adapter differs from our merged model beyond 2e-6 * max|logit|";
  EXPECT_EQ(c.top1_agree, kTokens);
  EXPECT_GT(without.max_abs_diff, kF32RatioBar * without.max_abs_logit * 100)
      << "the adapter did not move llama.cpp's logits: the comparison proves nothing";
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Tiny, LoraAdapterOracle,
                         ::testing::Values("tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"),
                         stoa::test::PresetParamName());

// What llama.cpp cannot take or would read as another model is refused before a file is written.
TEST(LoraAdapterGguf, RefusesExpertsAndAnotherBase) {
  const fs::path dir = work_dir() / "lora_adapter_refusals";
  fs::create_directories(dir);
  const ModelWeights moe = test_weights("tiny-lfm2moe");
  PeftAdapter expert;
  expert.rank = 2;
  expert.alpha = 4;
  for (const auto& [name, w] : moe.tensors) {
    if (name.find(".experts.") == std::string::npos || w.rank() != 2) continue;
    const std::string module = name.substr(0, name.size() - 7);
    expert.tensors.emplace(module + ".lora_A.weight", Tensor(DType::kF32, {2, w.shape()[1]}));
    expert.tensors.emplace(module + ".lora_B.weight", Tensor(DType::kF32, {w.shape()[0], 2}));
    break;
  }
  ASSERT_FALSE(expert.tensors.empty());
  const std::string path = (dir / "x.gguf").string();
  try {
    export_gguf_lora_adapter(moe.config, expert, path);
    ADD_FAILURE() << "an expert adapter was written";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
  }
  // The qwen3 adapter on the lfm2 base: its modules are no matrices there.
  const ModelWeights qwen = test_weights("tiny-qwen3");
  ModelWeights merged = clone(qwen);
  const PeftAdapter adapter = random_adapter(qwen, &merged);
  try {
    export_gguf_lora_adapter(test_weights("tiny-lfm2").config, adapter, path);
    ADD_FAILURE() << "an adapter of another base was written";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("another base model"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoa
