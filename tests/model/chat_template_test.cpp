// ChatTemplate: loading from tokenizer_config.json (string and named-list forms, AddedToken
// special tokens), chat_template.jinja beside it, bad configs, the BOS rule, and the default
// demo's ChatML template rendering exactly the ChatML prompt Stoa always used.
#include <fstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "model/chat_template.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace stoa {
namespace {

using nlohmann::ordered_json;

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

ordered_json user(const std::string& content) {
  return ordered_json::array({{{"role", "user"}, {"content", content}}});
}

using test::error_of;

TEST(ChatTemplate, DemoTokenizerRendersTodaysChatMl) {
  std::string dir = std::string(std::getenv("STOA_SOURCE_DIR")) + "/assets/warm-start";
  std::optional<ChatTemplate> t = ChatTemplate::from_model_dir(dir);
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->add_bos_token());
  for (std::string message : {"What is 2 + 2?", "", "multi\nline \"quoted\" {{ x }} \xC3\xA9"}) {
    EXPECT_EQ(t->generation_prompt(user(message)),
              "<|im_start|>user\n" + message + "<|im_end|>\n<|im_start|>assistant\n");
  }
}

TEST(ChatTemplate, ConfigForms) {
  std::optional<ChatTemplate> plain = ChatTemplate::from_tokenizer_config(
      R"({"chat_template": "{{ bos_token }}[{{ messages[0].content }}]{{ eos_token }}",
          "bos_token": {"content": "<s>", "special": true}, "eos_token": "</s>"})",
      "cfg.json");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->render(user("x"), false), "<s>[x]</s>");
  EXPECT_EQ(plain->bos_token(), "<s>");

  std::optional<ChatTemplate> named = ChatTemplate::from_tokenizer_config(
      R"({"chat_template": [{"name": "tool_use", "template": "T"},
                            {"name": "default", "template": "D{{ add_generation_prompt }}"}]})",
      "cfg.json");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->render(user("x"), true), "DTrue");

  EXPECT_FALSE(ChatTemplate::from_tokenizer_config(R"({"bos_token": "<s>"})", "cfg.json"));
  EXPECT_FALSE(ChatTemplate::from_tokenizer_config(R"({"chat_template": null})", "cfg.json"));
}

TEST(ChatTemplate, BadConfigsAreRefused) {
  const char* bad[] = {
      "not json",
      "[]",
      R"({"chat_template": 5})",
      R"({"chat_template": [{"name": "tool_use", "template": "T"}]})",
      R"({"chat_template": [{"name": "default"}]})",
      R"({"chat_template": "x", "bos_token": 5})",
      R"({"chat_template": "x", "add_bos_token": "yes"})",
      R"({"chat_template": "x", "add_bos_token": true})",  // no bos_token to add
      R"({"chat_template": "{% if %}"})",
  };
  for (const char* config : bad) {
    Error e = error_of([&] { ChatTemplate::from_tokenizer_config(config, "cfg.json"); });
    EXPECT_EQ(e.kind(), ErrorKind::kBadFormat) << config;
    EXPECT_NE(std::string(e.what()).find("cfg.json"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, ModelDirPrefersChatTemplateJinja) {
  testing::TempDir dir("chat-template");
  EXPECT_FALSE(ChatTemplate::from_model_dir(dir.path()));
  write(dir.file("tokenizer_config.json"),
        R"({"chat_template": "from config", "bos_token": "<s>", "add_bos_token": true})");
  EXPECT_EQ(ChatTemplate::from_model_dir(dir.path())->render(user("x"), true), "from config");
  write(dir.file("chat_template.jinja"), "from file {{ bos_token }}\n");
  std::optional<ChatTemplate> t = ChatTemplate::from_model_dir(dir.path());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->render(user("x"), true), "from file <s>");
  EXPECT_TRUE(t->add_bos_token());
  // A template file alone (no config) works too, without special tokens.
  std::filesystem::remove(dir.file("tokenizer_config.json"));
  EXPECT_EQ(ChatTemplate::from_model_dir(dir.path())->render(user("x"), true), "from file ");
  write(dir.file("chat_template.jinja"), "{% for %}");
  Error e = error_of([&] { ChatTemplate::from_model_dir(dir.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kBadFormat);
  EXPECT_NE(std::string(e.what()).find("chat_template.jinja line 1"), std::string::npos)
      << e.what();
}

// BOS exactly once: added when the config asks and the template did not write it; never twice.
TEST(ChatTemplate, BosExactlyOnce) {
  ChatTemplate adds = ChatTemplate::from_text("[{{ messages[0].content }}]", "t", "<s>", "", true);
  EXPECT_EQ(adds.generation_prompt(user("x")), "<s>[x]");
  ChatTemplate writes =
      ChatTemplate::from_text("{{- bos_token -}}[{{ messages[0].content }}]", "t", "<s>", "", true);
  EXPECT_EQ(writes.generation_prompt(user("x")), "<s>[x]");
  ChatTemplate writes_only = ChatTemplate::from_text("{{- bos_token -}}[{{ messages[0].content }}]",
                                                     "t", "<s>", "", false);
  EXPECT_EQ(writes_only.generation_prompt(user("x")), "<s>[x]");
  ChatTemplate neither =
      ChatTemplate::from_text("[{{ messages[0].content }}]", "t", "<s>", "", false);
  EXPECT_EQ(neither.generation_prompt(user("x")), "[x]");
}

TEST(ChatTemplate, RenderRefusesBadInput) {
  ChatTemplate t = ChatTemplate::from_text(
      "{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}"
      "{{ raise_exception('role ' + m.role + ' is not supported') }}{% endif %}{% endfor %}",
      "strict.jinja");
  Error refused = error_of([&] {
    t.render(ordered_json::array({{{"role", "robot"}, {"content", "x"}}}), true);
  });
  EXPECT_EQ(refused.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(refused.what()).find("role robot is not supported"), std::string::npos);
  EXPECT_EQ(error_of([&] { t.render(ordered_json::object(), true); }).kind(),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(error_of([&] { t.render(user("\xFF\xFE"), true); }).kind(),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(error_of([&] { t.render(user("x"), true, ordered_json::array()); }).kind(),
            ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace stoa
