// env/model_codec.h: the one rule by which the worker, the hub, a validator and eval turn a
// model directory into a codec and the ids that may be sampled.
#include "env/model_codec.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/presets.h"
#include "model/tiny_tokenizer.h"
#include "support/temp_dir.h"

namespace stoa::env {
namespace {

namespace fs = std::filesystem;

class ModelCodecTest : public stoa::testing::TempDirTest {
 protected:
  void write_tokenizer(int merges) {
    test::TinySpec spec;
    const std::string letters = "abcdefghijklmnopqrstuvwxyz";
    for (int i = 0; i < merges; ++i)
      spec.merges.push_back({std::string(1, letters[static_cast<size_t>(i) % 26]),
                             std::string(1, letters[static_cast<size_t>(i / 26) % 26])});
    std::ofstream(dir / "tokenizer.json") << test::tiny_tokenizer_json(spec).dump();
  }
  static ModelConfig with_vocab(int64_t vocab) {
    ModelConfig c;
    c.vocab_size = vocab;
    return c;
  }
};

TEST_F(ModelCodecTest, TheTokenizerDecidesWhatMayBeSampled) {
  write_tokenizer(10);  // 256 bytes + 10 merges = 266 ids
  // An embedding table padded past the tokenizer: only the tokenizer's ids are sampled.
  const ModelCodec padded = load_model_codec(dir.string(), with_vocab(300), "test");
  EXPECT_EQ(padded.sample_vocab, 266);
  EXPECT_EQ(padded.codec->decode(padded.codec->encode("ab ba")), "ab ba");
  const ModelCodec exact = load_model_codec(dir.string(), with_vocab(266), "test");
  EXPECT_EQ(exact.sample_vocab, 266);
}

TEST_F(ModelCodecTest, ATokenizerLargerThanTheModelIsRefused) {
  write_tokenizer(10);
  try {
    load_model_codec(dir.string(), with_vocab(260), "stoa work");
    FAIL() << "ids past the embedding table would have been produced";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadFormat);
    EXPECT_NE(std::string(e.what()).find("stoa work: tokenizer"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("266 tokens but the model's vocabulary is 260"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(ModelCodecTest, WithoutATokenizerTheModelIsRefusedSayingWhereOneComesFrom) {
  try {
    load_model_codec(dir.string(), with_vocab(512), "run");
    FAIL() << "a model without a tokenizer was read as bytes without a word";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    const std::string what = e.what();
    EXPECT_NE(what.find("run: " + dir.string() + " has no tokenizer.json"), std::string::npos)
        << what;
    EXPECT_NE(what.find("stoa tokenizer train"), std::string::npos) << what;
    EXPECT_NE(what.find("\"stoa_tokenizer\": \"bytes\""), std::string::npos) << what;
  }
}

TEST_F(ModelCodecTest, BytesAreTheTokensOnlyWhenTheConfigSaysSo) {
  ModelConfig config = with_vocab(512);
  config.byte_tokens = true;
  const ModelCodec bytes = load_model_codec(dir.string(), config, "test");
  EXPECT_EQ(bytes.sample_vocab, 256);
  EXPECT_EQ(bytes.codec->encode("A"), std::vector<int32_t>{65});
  config.vocab_size = 200;
  EXPECT_THROW(load_model_codec(dir.string(), config, "test"), Error);
  // Both a tokenizer and a config saying bytes: which one was meant is not guessed.
  config.vocab_size = 512;
  write_tokenizer(10);
  EXPECT_THROW(load_model_codec(dir.string(), config, "test"), Error);
}

TEST_F(ModelCodecTest, TheBytesKeyRoundTripsThroughConfigJson) {
  ModelConfig config = preset_config("tiny-lfm2");
  EXPECT_FALSE(parse_model_config(model_config_to_json(config).dump(), "c").byte_tokens);
  config.byte_tokens = true;
  const nlohmann::json written = model_config_to_json(config);
  EXPECT_EQ(written.at("stoa_tokenizer"), "bytes");
  EXPECT_TRUE(parse_model_config(written.dump(), "c").byte_tokens);
  nlohmann::json other = written;
  other["stoa_tokenizer"] = "words";
  EXPECT_THROW(parse_model_config(other.dump(), "c"), Error);
}

}  // namespace
}  // namespace stoa::env
