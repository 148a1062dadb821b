// TokenCodec over the model's own tokenizer (model/tokenizer.h) and, when the model directory
// has one, its chat template (model/chat_template.h): what a worker uses.
#pragma once
#include <optional>

#include "env/token_codec.h"
#include "model/chat_template.h"
#include "model/tokenizer.h"

namespace stoa::env {

class TokenizerCodec final : public TokenCodec {
 public:
  // A template that writes or adds a bos_token must name a token of this vocabulary (else the
  // "BOS" would be encoded as plain text): kInvalidArgument otherwise.
  explicit TokenizerCodec(Tokenizer tokenizer,
                          std::optional<ChatTemplate> chat_template = std::nullopt);
  // Special tokens in the text (e.g. <|im_start|> of the chat template) map to their ids.
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  bool chat_ml() const override { return chat_ml_; }
  const ChatTemplate* chat_template() const override {
    return chat_template_ ? &*chat_template_ : nullptr;
  }
  const Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  Tokenizer tokenizer_;
  bool chat_ml_;
  std::optional<ChatTemplate> chat_template_;
};

}  // namespace stoa::env
