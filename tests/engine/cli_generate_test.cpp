// `stoa generate` end to end: a Hugging Face-layout directory (config.json, model.safetensors,
// tokenizer.json) written by our own tools, the binary run on it, its JSON checked against the
// engine run in-process; the embedded model; a missing directory.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/embedded_model.h"
#include "engine/generate.h"
#include "model/bpe_trainer.h"
#include "model/presets.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "support/stoa_cli.h"

namespace stoa::engine {
namespace {

namespace fs = std::filesystem;

struct CliRun {
  int status = 0;
  std::string out;
};

CliRun stoa(const std::string& args) {
  const char* binary = std::getenv("STOA_BINARY");
  EXPECT_NE(binary, nullptr) << "STOA_BINARY is not set (run through ctest)";
  std::string cmd = std::string("'") + (binary ? binary : "stoa") + "' " + args + " 2>&1";
  CliRun r;
  r.out = ::stoa::testing::capture_output(cmd, &r.status);
  return r;
}

nlohmann::json last_json_line(const std::string& out) {
  size_t start = out.rfind("\n{");
  return nlohmann::json::parse(out.substr(start == std::string::npos ? 0 : start + 1));
}

TEST(CliGenerate, ModelDirectoryMatchesInProcessEngine) {
  fs::path dir = fs::temp_directory_path() / ("stoa_generate_test_" + std::to_string(::getpid()));
  BpeTrainerOptions options;
  options.vocab_size = 400;
  BpeTrainer trainer(options);
  trainer.add_text(embedded_corpus());
  TrainedBpe bpe = trainer.train();
  bpe.write(dir.string());
  Tokenizer tokenizer = Tokenizer::from_file((dir / "tokenizer.json").string());
  ModelConfig config = preset_config("tiny-qwen3");
  config.vocab_size = tokenizer.vocab_size();
  ModelWeights weights = random_weights(config, 3, 0.08f);
  save_model_dir(weights, dir.string());

  CliRun r = stoa("generate --model '" + dir.string() +
                  "' --prompt 'insulin resistance' --json --max-tokens 6 --temperature 0.7 "
                  "--top-k 20 --seed 9");
  ASSERT_EQ(r.status, 0) << r.out;
  nlohmann::json j = last_json_line(r.out);

  ModelRunner runner = ModelRunner::from_model(weights, WeightFormat::kInt8);
  std::vector<int32_t> prompt = tokenizer.encode("insulin resistance", true);
  GenerateOptions g;
  g.max_tokens = 6;
  g.sampling.temperature = 0.7;
  g.sampling.top_k = 20;
  g.seed = 9;
  Sequence seq = runner.new_sequence(64);
  GenerationResult expected = generate(runner, seq, prompt, g);
  EXPECT_EQ(j.at("prompt_ids").get<std::vector<int32_t>>(), prompt);
  EXPECT_EQ(j.at("ids").get<std::vector<int32_t>>(), expected.tokens);
  std::vector<float> logprobs = j.at("logprobs").get<std::vector<float>>();
  ASSERT_EQ(logprobs.size(), expected.logprobs.size());
  for (size_t i = 0; i < logprobs.size(); ++i) EXPECT_NEAR(logprobs[i], expected.logprobs[i], 1e-6);
  EXPECT_EQ(j.at("text").get<std::string>(), tokenizer.decode(expected.tokens, true));
  EXPECT_EQ(j.at("weights"), "int8");
  fs::remove_all(dir);
}

TEST(CliGenerate, EmbeddedModel) {
  CliRun r = stoa("generate --max-tokens 5 --temperature 0 --json --top-logprobs 2");
  ASSERT_EQ(r.status, 0) << r.out;
  nlohmann::json j = last_json_line(r.out);
  EXPECT_EQ(j.at("ids").size(), 5u);
  for (const auto& lp : j.at("logprobs")) EXPECT_EQ(lp.get<double>(), 0.0);  // greedy
  CliRun text = stoa("generate --max-tokens 5 --prompt 'The kinase'");
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("embedded tiny model"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("The kinase"), std::string::npos) << text.out;
}

TEST(CliGenerate, MissingModelDirectory) {
  CliRun r = stoa("generate --model /nonexistent/stoa-model --max-tokens 2");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("/nonexistent/stoa-model"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace stoa::engine
