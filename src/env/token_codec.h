// What the episode logic needs from a tokenizer: text -> ids, ids -> text, the model's chat
// template if it has one, and whether the model speaks ChatML. The env layer depends on this small
// interface rather than on one tokenizer class so that a worker can plug in the model's tokenizer
// (model/tokenizer.h, see tokenizer_codec.h) and tests and byte-level toy models can use ByteCodec.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stoa {
class ChatTemplate;  // model/chat_template.h
}  // namespace stoa

namespace stoa::env {

class TokenCodec {
 public:
  virtual ~TokenCodec() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // True when the vocabulary has <|im_start|> and <|im_end|> (prompts without a chat template
  // are then wrapped as ChatML; the search curriculum writes ChatML turns).
  virtual bool chat_ml() const = 0;
  // The model's chat template (tokenizer_config.json / chat_template.jinja), or null.
  virtual const ChatTemplate* chat_template() const { return nullptr; }
};

// One token per byte (ids 0..255); decode is the exact inverse of encode. A real codec for
// byte-level models, and the reference for token-exact tests of truncation and masks.
class ByteCodec final : public TokenCodec {
 public:
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  bool chat_ml() const override { return false; }
};

// The prompt text for one user message: [{role: user, content: message}] rendered through the
// codec's chat template with add_generation_prompt (and BOS as ChatTemplate::generation_prompt
// says) when it has one; else "<|im_start|>user\n{message}<|im_end|>\n<|im_start|>assistant\n"
// when codec.chat_ml(), else the message unchanged.
std::string apply_chat_template(const TokenCodec& codec, std::string_view user_message);

}  // namespace stoa::env
