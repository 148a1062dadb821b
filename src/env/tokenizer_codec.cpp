#include "env/tokenizer_codec.h"

#include "core/error.h"

namespace stoa::env {

TokenizerCodec::TokenizerCodec(Tokenizer tokenizer, std::optional<ChatTemplate> chat_template)
    : tokenizer_(std::move(tokenizer)),
      chat_ml_(tokenizer_.token_id("<|im_start|>").has_value() &&
               tokenizer_.token_id("<|im_end|>").has_value()),
      chat_template_(std::move(chat_template)) {
  if (!chat_template_) return;
  // A BOS spelled as text the vocabulary does not know would be encoded as plain characters:
  // refuse it when the prompt can carry it (the config adds it, or the template mentions it).
  const std::string& bos = chat_template_->bos_token();
  bool uses_bos = chat_template_->add_bos_token() ||
                  chat_template_->text().find("bos_token") != std::string::npos;
  STOA_CHECK(bos.empty() || !uses_bos || tokenizer_.token_id(bos).has_value(),
             ErrorKind::kInvalidArgument, "the chat template's bos_token '", bos,
             "' is not a token of ", tokenizer_.source());
}

std::vector<int32_t> TokenizerCodec::encode(std::string_view text) const {
  // Without the tokenizer's post-processor (no BOS/EOS added): prompts and observations are
  // pieces of one running sequence. A BOS the model wants is already in the prompt text
  // (ChatTemplate::generation_prompt) and maps to its special id here, so it appears once.
  return tokenizer_.encode(text, /*add_special_tokens=*/false);
}

std::string TokenizerCodec::decode(std::span<const int32_t> ids) const {
  return tokenizer_.decode(ids, /*skip_special_tokens=*/false);
}

}  // namespace stoa::env
