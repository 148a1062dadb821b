// A model's chat template: the Jinja text Hugging Face checkpoints ship (tokenizer_config.json's
// `chat_template`, or chat_template.jinja beside it) with the special tokens it refers to, rendered
// by our own Jinja subset (model/jinja/). Rendering matches @huggingface/jinja byte for byte on
// the Qwen3 and LFM2 templates (tests/model/chat_template_oracle_test.cpp).
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/jinja/template.h"

namespace stoa {

class ChatTemplate {
 public:
  // The template of a Hugging Face model directory: chat_template.jinja when present (newer
  // checkpoints; it wins over the config's, as in transformers), else tokenizer_config.json's
  // `chat_template`. nullopt when the directory has neither. A malformed config or template
  // throws stoa::Error(kBadFormat) naming the file.
  static std::optional<ChatTemplate> from_model_dir(const std::string& dir);
  // The same from a tokenizer_config.json's text. `chat_template` is a string or a list of
  // {"name", "template"} (the "default" one is used); `template_override` replaces it.
  static std::optional<ChatTemplate> from_tokenizer_config(
      const std::string& config_text, const std::string& source,
      std::optional<std::string> template_override = std::nullopt);
  // A template text with its special tokens given directly.
  static ChatTemplate from_text(const std::string& text, const std::string& source,
                                std::string bos_token = "", std::string eos_token = "",
                                bool add_bos_token = false);

  // Renders `messages` (a JSON list of {"role", "content", ...}) with the template's variables
  // (messages, add_generation_prompt, bos_token, eos_token) plus `extra` (a JSON object, e.g.
  // {"enable_thinking": false} or {"tools": [...]}). Strings must be valid UTF-8. Throws
  // stoa::Error(kInvalidArgument) when the template refuses the messages (raise_exception) or
  // exceeds its bounds.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  // The text a generation starts from: render(messages, add_generation_prompt = true, extra),
  // with bos_token() in front when add_bos_token() is set and the template did not already
  // write it. So the prompt starts with BOS exactly once whether the template emits it (LFM2's
  // `{{- bos_token -}}`) or the config asks for it; the codec then encodes without the
  // tokenizer's own special tokens (add_special_tokens = false), which would add a second one.
  std::string generation_prompt(
      const nlohmann::ordered_json& messages,
      const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  const std::string& text() const { return text_; }
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }
  bool add_bos_token() const { return add_bos_token_; }

 private:
  ChatTemplate(jinja::Template tmpl, std::string text, std::string bos, std::string eos,
               bool add_bos)
      : template_(std::move(tmpl)),
        text_(std::move(text)),
        bos_token_(std::move(bos)),
        eos_token_(std::move(eos)),
        add_bos_token_(add_bos) {}
  jinja::Template template_;
  std::string text_;
  std::string bos_token_;
  std::string eos_token_;
  bool add_bos_token_;
};

}  // namespace stoa
