// The tokenizer commands end to end through the built `stoa` binary: `stoa tokenizer train` on a
// .jsonl corpus, then `stoa tokenize` encode/decode round trips and bad-line handling.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/tokenizer.h"
#include "model/tokenizer_oracle_corpus.h"
#include "model/tokenizer_oracle_support.h"
#include "support/file_text.h"
#include "support/temp_dir.h"

namespace stoa {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status;
  std::string out, err;
};

Outcome run(const std::string& args, const std::string& stdin_text, const fs::path& dir) {
  fs::path in = dir / "stdin.txt", out = dir / "stdout.txt", err = dir / "stderr.txt";
  std::ofstream(in, std::ios::binary) << stdin_text;
  std::string cmd = test::shell_quote(test::env_or_throw("STOA_BINARY")) + " " + args + " < " +
                    test::shell_quote(in) + " > " + test::shell_quote(out) + " 2> " +
                    test::shell_quote(err);
  int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, testing::read_text(out), testing::read_text(err)};
}

class TokenizerCli : public stoa::testing::TempDirTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(test::env_or_throw("STOA_BINARY")))
        << test::env_or_throw("STOA_BINARY") << " does not exist: build the stoa target first";
  }
};

TEST_F(TokenizerCli, TrainThenEncodeDecode) {
  {
    std::ofstream corpus(dir / "corpus.jsonl", std::ios::binary);
    for (const auto& s : test::oracle_corpus(5, 200))
      corpus << nlohmann::json({{"contents", s}, {"id", 1}}).dump() << "\n";
  }
  Outcome train = run("tokenizer train --corpus " + (dir / "corpus.jsonl").string() +
                          " --vocab-size 700 --out " + (dir / "tok").string(),
                      "", dir);
  ASSERT_EQ(train.status, 0) << train.err;
  nlohmann::json summary = nlohmann::json::parse(train.out);
  EXPECT_EQ(summary.at("vocab_size"), 700);
  ASSERT_TRUE(fs::exists(dir / "tok/tokenizer_config.json"));
  std::string tok_path = (dir / "tok/tokenizer.json").string();
  Tokenizer tok = Tokenizer::from_file(tok_path);

  std::vector<std::string> texts = {"hello <answer>x</answer>", "", "\xE4\xBD\xA0\xE5\xA5\xBD",
                                    "<|im_start|>user\nhi<|im_end|>"};
  std::string input;
  for (const auto& t : texts) input += nlohmann::json(t).dump() + "\n";
  Outcome enc = run("tokenize --tokenizer " + tok_path, input, dir);
  ASSERT_EQ(enc.status, 0) << enc.err;
  std::istringstream lines(enc.out);
  std::string line, decode_input;
  for (const auto& t : texts) {
    ASSERT_TRUE(std::getline(lines, line));
    EXPECT_EQ(nlohmann::json::parse(line).get<std::vector<int32_t>>(), tok.encode(t));
    decode_input += line + "\n";
  }
  Outcome dec = run("tokenize --decode --tokenizer " + tok_path, decode_input, dir);
  ASSERT_EQ(dec.status, 0) << dec.err;
  std::istringstream back(dec.out);
  for (const auto& t : texts) {
    ASSERT_TRUE(std::getline(back, line));
    EXPECT_EQ(nlohmann::json::parse(line).get<std::string>(), t);
  }
}

TEST_F(TokenizerCli, BadLinesNameTheLine) {
  {
    std::ofstream corpus(dir / "corpus.txt", std::ios::binary);
    corpus << "some text for a tiny tokenizer\nmore text\n";
  }
  Outcome train = run("tokenizer train --corpus " + (dir / "corpus.txt").string() +
                          " --vocab-size 280 --out " + (dir / "tok").string(),
                      "", dir);
  ASSERT_EQ(train.status, 0) << train.err;
  std::string tok_path = (dir / "tok/tokenizer.json").string();
  Outcome bad = run("tokenize --tokenizer " + tok_path, "\"ok\"\n[1,2]\n\"never\"\n", dir);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("line 2"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.out.begin(), bad.out.end(), '\n'), 1);  // line 1 was answered
  Outcome skip =
      run("tokenize --skip-bad-lines --tokenizer " + tok_path, "\"ok\"\n{oops\n\"x\"\n", dir);
  EXPECT_EQ(skip.status, 3);
  EXPECT_NE(skip.out.find("\nnull\n"), std::string::npos) << skip.out;
  Outcome bad_id = run("tokenize --decode --tokenizer " + tok_path, "[1]\n[999999]\n", dir);
  EXPECT_NE(bad_id.status, 0);
  EXPECT_NE(bad_id.err.find("line 2"), std::string::npos) << bad_id.err;
  Outcome missing = run("tokenize --tokenizer " + (dir / "nope.json").string(), "", dir);
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("nope.json"), std::string::npos);
}

}  // namespace
}  // namespace stoa
