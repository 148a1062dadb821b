// export-hf on to llama.cpp (label oracle): a tiny preset's weights (the parity test's, norms
// jittered) exported by `stoa model export-hf` in bf16, exported on by `stoa model export-gguf
// --model <exported dir>` as F32, and scored by llama.cpp; Stoa's engine scores the same tokens
// on the exported directory as our importer reads it. Bar: the parity test's F32 one,
// max |Δlogit| <= 2e-6 * max |logit| and top-1 agreement everywhere. The shift bf16 itself makes
// against the f32 original is printed (measured, not a bar).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "engine/model_runner.h"
#include "model/hf_export_fixture.h"
#include "model/weights.h"
#include "oracle/llama_oracle.h"
#include "support/param_names.h"
#include "support/stoa_cli.h"

namespace stoa {
namespace {

namespace fs = std::filesystem;
using namespace oracle;  // work_dir, llama_logits, compare, ... (oracle/llama_oracle.h)

class HfExportOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(HfExportOracle, TheExportedModelRunsInLlamaCppAsInOurEngine) {
  const fs::path dir = work_dir() / ("hf_export_" + GetParam());
  fs::remove_all(dir);
  const ModelWeights original = test_weights(GetParam());
  test::write_source_model(original, dir / "src");
  const std::string stoa = testing::stoa_binary();
  run_capture(cat(stoa, " model export-hf --from '", (dir / "src").string(), "' --out '",
                  (dir / "hf").string(), "' 2>&1"));
  const std::string gguf = (dir / "model.gguf").string();
  run_capture(cat(stoa, " model export-gguf --model '", (dir / "hf").string(), "' --out '", gguf,
                  "' --type f32 2>&1"));

  const ModelWeights exported = load_model_dir((dir / "hf").string());
  const int64_t V = exported.config.vocab_size;
  const std::vector<int32_t> tokens = random_tokens(V, 44);
  const std::vector<float> ref = llama_logits(gguf, tokens, kPrefill, V);
  const Tensor ours =
      engine::ModelRunner::from_model(exported, engine::WeightFormat::kF32).score(tokens, kPrefill);
  const Compare c = compare(ref, ours, kTokens, V);
  const Tensor f32 =
      engine::ModelRunner::from_model(original, engine::WeightFormat::kF32).score(tokens, kPrefill);
  const std::vector<float> f32_logits(f32.as<float>(), f32.as<float>() + f32.numel());
  const Compare drift = compare(f32_logits, ours, kTokens, V);
  std::printf(
      "[oracle] %-13s export-hf bf16 -> gguf f32: max|dlogit| %.3e  max|logit| %.3f  ratio %.3e "
      "(bar 2e-6)  top-1 %lld/%lld; bf16 vs the f32 original: max|dlogit| %.3e  mean KL %.3e  "
      "top-1 %lld/%lld\n",
      GetParam().c_str(), c.max_abs_diff, c.max_abs_logit, c.max_abs_diff / c.max_abs_logit,
      static_cast<long long>(c.top1_agree), static_cast<long long>(kTokens), drift.max_abs_diff,
      drift.mean_kl, static_cast<long long>(drift.top1_agree), static_cast<long long>(kTokens));
  EXPECT_GT(drift.max_abs_diff, 0.0) << "the export did not round to bf16";
  EXPECT_GT(c.max_abs_logit, 0.0);
  EXPECT_LE(c.max_abs_diff, kF32RatioBar * c.max_abs_logit)
      << "llama.cpp on the exported model differs from our engine beyond 2e-6 * max|logit|";
  EXPECT_EQ(c.top1_agree, kTokens);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Tiny, HfExportOracle,
                         ::testing::Values("tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"),
                         stoa::test::PresetParamName());

}  // namespace
}  // namespace stoa
