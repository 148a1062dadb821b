#include "env/token_codec.h"

#include "core/error.h"
#include "model/chat_template.h"

namespace stoa::env {

std::vector<int32_t> ByteCodec::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteCodec::decode(std::span<const int32_t> ids) const {
  std::string text(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    STOA_CHECK(ids[i] >= 0 && ids[i] < 256, ErrorKind::kInvalidArgument, "token id ", ids[i],
               " at position ", i, " is outside the byte vocabulary");
    text[i] = static_cast<char>(ids[i]);
  }
  return text;
}

std::string apply_chat_template(const TokenCodec& codec, std::string_view user_message) {
  if (const ChatTemplate* chat = codec.chat_template()) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    messages.push_back({{"role", "user"}, {"content", std::string(user_message)}});
    return chat->generation_prompt(messages);
  }
  if (!codec.chat_ml()) return std::string(user_message);
  return "<|im_start|>user\n" + std::string(user_message) + "<|im_end|>\n<|im_start|>assistant\n";
}

}  // namespace stoa::env
