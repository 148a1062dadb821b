// env/end_of_turn.h: the token the chat template ends a turn with, and the check at start that
// generation stops on it (issue 49: a preset's eos_token_id 2 beside a template ending turns
// with <|im_end|> let every response run to max_new_tokens).
#include "env/end_of_turn.h"

#include <cstdlib>
#include <stdexcept>

#include <gtest/gtest.h>

#include "core/error.h"
#include "env/tokenizer_codec.h"
#include "model/chat_template.h"
#include "model/tiny_tokenizer.h"
#include "support/file_text.h"

namespace stoa::env {
namespace {

std::string source_dir() {
  const char* dir = std::getenv("STOA_SOURCE_DIR");
  if (!dir) throw std::runtime_error("STOA_SOURCE_DIR is not set (run through ctest)");
  return dir;
}

Tokenizer chat_tokenizer() {
  test::TinySpec spec;
  for (const char* t : {"<|startoftext|>", "<|im_start|>", "<|im_end|>"})
    spec.added.push_back({{"content", t},
                          {"single_word", false},
                          {"lstrip", false},
                          {"rstrip", false},
                          {"normalized", false},
                          {"special", true}});
  return Tokenizer::from_json(test::tiny_tokenizer_json(spec).dump(), "chat.json");
}

TokenizerCodec lfm2_codec() {
  const std::string lfm2 = stoa::testing::read_text_or_throw(
      source_dir() + "/tests/model/fixtures/chat_templates/lfm2-8b-a1b.jinja");
  return TokenizerCodec(chat_tokenizer(), ChatTemplate::from_text(lfm2, "lfm2.jinja",
                                                                  "<|startoftext|>", "<|im_end|>"));
}

ModelConfig with_eos(int64_t eos) {
  ModelConfig c;
  c.vocab_size = 512;
  c.eos_token_id = eos;
  return c;
}

TEST(EndOfTurn, IsTheSpecialTokenTheTemplateWritesAfterAReply) {
  const TokenizerCodec codec = lfm2_codec();
  const auto end = end_of_turn_token(codec);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->text, "<|im_end|>");
  EXPECT_EQ(end->id, codec.tokenizer().token_id("<|im_end|>").value());
  // No template but a ChatML vocabulary: prompts are ChatML, so are turns' ends.
  const TokenizerCodec chat_ml(chat_tokenizer());
  ASSERT_TRUE(end_of_turn_token(chat_ml).has_value());
  EXPECT_EQ(end_of_turn_token(chat_ml)->text, "<|im_end|>");
  // Bytes and a template that closes a turn with plain text: nothing to hold generation to.
  EXPECT_FALSE(end_of_turn_token(ByteCodec()).has_value());
  const TokenizerCodec plain(chat_tokenizer(),
                             ChatTemplate::from_text("{% for m in messages %}{{ m.content }}\n\n"
                                                     "{% endfor %}",
                                                     "plain.jinja"));
  EXPECT_FALSE(end_of_turn_token(plain).has_value());
}

TEST(EndOfTurn, AnEosThatIsNotTheTemplatesEndOfTurnIsRefusedNamingBoth) {
  const TokenizerCodec codec = lfm2_codec();
  const int32_t im_end = codec.tokenizer().token_id("<|im_end|>").value();
  try {
    check_turns_end(codec, with_eos(2), {"</answer>"}, "run");
    FAIL() << "a run whose turns never end on <|im_end|> was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("run: the chat template ends a turn with \"<|im_end|>\" (id " +
                        std::to_string(im_end) + ")"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("eos_token_id 2"), std::string::npos) << what;
    EXPECT_NE(what.find("\"</answer>\""), std::string::npos) << what;
    EXPECT_NE(what.find("\"eos_token_id\": " + std::to_string(im_end)), std::string::npos) << what;
  }
  EXPECT_THROW(check_turns_end(codec, with_eos(-1), {}, "eval"), Error);
  // Generation stops on it: as EOS, or as one of the task's stop strings.
  EXPECT_NO_THROW(check_turns_end(codec, with_eos(im_end), {"</answer>"}, "run"));
  EXPECT_NO_THROW(check_turns_end(codec, with_eos(2), {"<|im_end|>"}, "run"));
  // A model of bytes has no end-of-turn token to check.
  EXPECT_NO_THROW(check_turns_end(ByteCodec(), with_eos(2), {}, "run"));
}

}  // namespace
}  // namespace stoa::env
