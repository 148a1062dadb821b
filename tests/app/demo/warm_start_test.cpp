// The warm-start check: a warm start is used only by a demo whose data, index and tokenizer stages
// ran with its parameters and whose trained tokenizer.json is byte-identical to its own; anything
// missing or malformed is refused with the file named.
#include "app/demo/warm_start.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace stoa::app {
namespace {
namespace fs = std::filesystem;

class WarmStartTest : public stoa::testing::TempDirTest {
 protected:
  void SetUp() override {
    warm_ = dir / "warm";
    fs::create_directories(warm_);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer_config.json"})
      std::ofstream(warm_ / f) << f;
    std::ofstream(warm_ / "tokenizer.json") << R"({"vocab": "A"})";
    write_provenance(warm_.string(), chain_, {{"reached", true}});
    trained_tokenizer_ = dir / "tokenizer.json";
    std::ofstream(trained_tokenizer_) << R"({"vocab": "A"})";
  }

  fs::path warm_, trained_tokenizer_;
  const nlohmann::json chain_ = {{"data", {{"papers", 20000}, {"questions", 10000}, {"seed", 1}}},
                                 {"index", nlohmann::json::object()},
                                 {"tokenizer", {{"vocab_size", 4096}}},
                                 {"model-init", {{"preset", "demo"}, {"seed", 1}}}};
};

TEST_F(WarmStartTest, FitsTheDemoItWasMadeBy) {
  const WarmStart w = read_warm_start(warm_.string());
  EXPECT_EQ(w.provenance["sft_probe"]["reached"], true);
  // Later stages (model init, demonstrations, SFT) do not tie the weights to the data.
  nlohmann::json mine = chain_;
  mine.erase("model-init");
  EXPECT_EQ(warm_start_mismatch(w, mine, trained_tokenizer_.string()), "");

  const fs::path model = dir / "model-sft";
  install_warm_start(w, model.string());
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json",
                        "tokenizer_config.json", "provenance.json"})
    EXPECT_TRUE(fs::exists(model / f)) << f;
}

TEST_F(WarmStartTest, OtherDataOrTokenizerParametersDoNotFit) {
  const WarmStart w = read_warm_start(warm_.string());
  nlohmann::json other_seed = chain_;
  other_seed["data"]["seed"] = 2;
  const std::string why = warm_start_mismatch(w, other_seed, trained_tokenizer_.string());
  EXPECT_NE(why.find("data stage"), std::string::npos) << why;
  nlohmann::json other_vocab = chain_;
  other_vocab["tokenizer"]["vocab_size"] = 1024;
  EXPECT_NE(warm_start_mismatch(w, other_vocab, trained_tokenizer_.string()).find("tokenizer"),
            std::string::npos);
  nlohmann::json no_index = chain_;
  no_index.erase("index");
  EXPECT_NE(warm_start_mismatch(w, no_index, trained_tokenizer_.string()), "");
}

TEST_F(WarmStartTest, ADifferentTrainedTokenizerDoesNotFit) {
  std::ofstream(trained_tokenizer_) << R"({"vocab": "B"})";
  const WarmStart w = read_warm_start(warm_.string());
  const std::string why = warm_start_mismatch(w, chain_, trained_tokenizer_.string());
  EXPECT_NE(why.find("tokenizer.json differs"), std::string::npos) << why;
}

TEST_F(WarmStartTest, MissingOrMalformedFilesAreRefusedByName) {
  fs::remove(warm_ / "model.safetensors");
  const Error no_weights = stoa::test::error_of([&] { read_warm_start(warm_.string()); },
                                                "a warm start without weights was accepted");
  EXPECT_EQ(no_weights.kind(), ErrorKind::kNotFound);
  EXPECT_NE(std::string(no_weights.what()).find("model.safetensors"), std::string::npos)
      << no_weights.what();
  std::ofstream(warm_ / "model.safetensors") << "x";
  std::ofstream(warm_ / "provenance.json") << "{not json";
  const Error bad_provenance = stoa::test::error_of([&] { read_warm_start(warm_.string()); },
                                                    "a malformed provenance.json was accepted");
  EXPECT_EQ(bad_provenance.kind(), ErrorKind::kBadFormat);
  EXPECT_NE(std::string(bad_provenance.what()).find("provenance.json"), std::string::npos)
      << bad_provenance.what();
  EXPECT_THROW(read_warm_start((dir / "nowhere").string()), Error);
}

}  // namespace
}  // namespace stoa::app
