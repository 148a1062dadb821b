// `stoa model init` end to end: the binary writes a loadable directory, the same seed gives the
// same bytes, and bad arguments fail with a message.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "core/hash.h"
#include "model/config.h"
#include "model/presets.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "support/stoa_cli.h"
#include "support/temp_dir.h"

namespace stoa {
namespace {

struct CliResult {
  int status;
  std::string output;
};

CliResult run_stoa(const std::string& args) {
  const char* binary = std::getenv("STOA_BINARY");
  EXPECT_NE(binary, nullptr) << "STOA_BINARY is not set (run through ctest)";
  std::string command = cat(binary ? binary : "stoa", " ", args, " 2>&1");
  int status = 0;
  std::string output = ::stoa::testing::capture_output(command, &status);
  return {status, output};
}

TEST(ModelInitCli, WritesALoadableDeterministicDirectory) {
  testing::TempDir dir("cli");
  CliResult a = run_stoa(cat("model init --preset tiny-qwen3 --seed 9 --out ", dir.file("a")));
  ASSERT_EQ(a.status, 0) << a.output;
  CliResult b = run_stoa(cat("model init --preset tiny-qwen3 --seed 9 --out ", dir.file("b")));
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_EQ(testing::read_text(dir.file("a/model.safetensors")),
            testing::read_text(dir.file("b/model.safetensors")));

  ModelWeights loaded = load_model_dir(dir.file("a"));
  ModelWeights expected = random_weights(preset_config("tiny-qwen3"), 9);
  StateHasher h1, h2;
  for (const auto& [name, t] : loaded.tensors) h1.add(name, t.view());
  for (const auto& [name, t] : expected.tensors) h2.add(name, t.view());
  EXPECT_EQ(h1.finish(), h2.finish());
  EXPECT_NE(a.output.find(h2.finish().hex()), std::string::npos) << a.output;

  // --config with a written config.json gives the same model; bf16 is half the size.
  CliResult c = run_stoa(cat("model init --config ", dir.file("a/config.json"),
                             " --seed 9 --dtype bf16", " --out ", dir.file("c")));
  ASSERT_EQ(c.status, 0) << c.output;
  EXPECT_LT(testing::read_text(dir.file("c/model.safetensors")).size(),
            testing::read_text(dir.file("a/model.safetensors")).size() * 6 / 10);
}

// Issue 49: a model without a tokenizer trained on bytes, silently, and the presets' EOS (id 2, a
// byte in a trained tokenizer) was not the <|im_end|> the chat template ends turns with.
TEST(ModelInitCli, SaysWhereTheTokenizerComesFromAndTakesItsIds) {
  testing::TempDir dir("cli-tokenizer");
  CliResult bare = run_stoa(cat("model init --preset tiny-lfm2 --out ", dir.file("bare")));
  ASSERT_EQ(bare.status, 0) << bare.output;
  EXPECT_NE(bare.output.find("has no tokenizer yet"), std::string::npos) << bare.output;
  EXPECT_NE(bare.output.find("stoa tokenizer train"), std::string::npos) << bare.output;

  {
    std::ofstream corpus(dir.file("corpus.txt"));
    for (int i = 0; i < 40; ++i) corpus << "the hub keeps the port and the join string\n";
  }
  CliResult trained = run_stoa(cat("tokenizer train --corpus ", dir.file("corpus.txt"),
                                   " --vocab-size 300 --out ", dir.file("tok")));
  ASSERT_EQ(trained.status, 0) << trained.output;
  CliResult made = run_stoa(
      cat("model init --preset tiny-lfm2 --tokenizer ", dir.file("tok"), " --out ", dir.file("m")));
  ASSERT_EQ(made.status, 0) << made.output;
  EXPECT_NE(made.output.find("tokenizer from " + dir.file("tok")), std::string::npos)
      << made.output;
  const Tokenizer tok = Tokenizer::from_file(dir.file("tok/tokenizer.json"));
  const ModelConfig config = load_model_config(dir.file("m/config.json"));
  EXPECT_EQ(config.eos_token_id, tok.token_id("<|im_end|>").value())
      << "the template's end of turn";
  EXPECT_EQ(config.pad_token_id, tok.token_id("<|endoftext|>").value());
  EXPECT_EQ(config.vocab_size, (tok.vocab_size() + 31) / 32 * 32) << "a preset's is a placeholder";
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    EXPECT_EQ(testing::read_text(dir.file(cat("m/", f))),
              testing::read_text(dir.file(cat("tok/", f))));

  CliResult bytes =
      run_stoa(cat("model init --preset tiny-lfm2 --tokenizer bytes --out ", dir.file("bytes")));
  ASSERT_EQ(bytes.status, 0) << bytes.output;
  EXPECT_TRUE(load_model_config(dir.file("bytes/config.json")).byte_tokens);
}

TEST(ModelInitCli, BadArgumentsFailWithAMessage) {
  testing::TempDir dir("cli-bad");
  CliResult r = run_stoa(cat("model init --preset no-such --out ", dir.file("x")));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("no-such"), std::string::npos) << r.output;
  r = run_stoa(cat("model init --preset tiny-lfm2 --dtype q4 --out ", dir.file("x")));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--dtype"), std::string::npos) << r.output;
  r = run_stoa(cat("model init --config ", dir.file("missing.json"), " --out ", dir.file("x")));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("missing.json"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace stoa
