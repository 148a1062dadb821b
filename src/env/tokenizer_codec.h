// TokenCodec over the model's own tokenizer (model/tokenizer.h): what a worker uses.
#pragma once
#include "env/token_codec.h"
#include "model/tokenizer.h"

namespace stoa::env {

class TokenizerCodec final : public TokenCodec {
 public:
  explicit TokenizerCodec(Tokenizer tokenizer);
  // Special tokens in the text (e.g. <|im_start|> of the chat template) map to their ids.
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  bool chat_ml() const override { return chat_ml_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  Tokenizer tokenizer_;
  bool chat_ml_;
};

}  // namespace stoa::env
