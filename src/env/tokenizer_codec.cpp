#include "env/tokenizer_codec.h"

namespace stoa::env {

TokenizerCodec::TokenizerCodec(Tokenizer tokenizer)
    : tokenizer_(std::move(tokenizer)),
      chat_ml_(tokenizer_.token_id("<|im_start|>").has_value() &&
               tokenizer_.token_id("<|im_end|>").has_value()) {}

std::vector<int32_t> TokenizerCodec::encode(std::string_view text) const {
  // No BOS/EOS template: prompts and observations are pieces of one running sequence.
  return tokenizer_.encode(text, /*add_special_tokens=*/false);
}

std::string TokenizerCodec::decode(std::span<const int32_t> ids) const {
  return tokenizer_.decode(ids, /*skip_special_tokens=*/false);
}

}  // namespace stoa::env
