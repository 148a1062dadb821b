#include "env/end_of_turn.h"

#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "env/tokenizer_codec.h"
#include "model/chat_template.h"

namespace stoa::env {
namespace {

// An assistant message no template alters, so what follows it in the rendering is what the
// template writes to close a turn.
constexpr std::string_view kProbeReply = "stoa-end-of-turn-probe";

// Quoted for a message, whatever bytes a vocabulary spelling holds.
std::string quoted(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::optional<EndOfTurnToken> end_of_turn_token(const TokenCodec& codec) {
  const auto* tokenizer_codec = dynamic_cast<const TokenizerCodec*>(&codec);
  if (!tokenizer_codec) return std::nullopt;  // bytes: no token is special
  const Tokenizer& tokenizer = tokenizer_codec->tokenizer();
  const ChatTemplate* chat_template = codec.chat_template();
  if (!chat_template) {
    if (!codec.chat_ml()) return std::nullopt;
    const std::optional<int32_t> id = tokenizer.token_id("<|im_end|>");
    return EndOfTurnToken{*id, "<|im_end|>"};
  }
  std::string rendered;
  try {
    const nlohmann::ordered_json messages = {
        {{"role", "user"}, {"content", "Hello"}},
        {{"role", "assistant"}, {"content", std::string(kProbeReply)}}};
    rendered = chat_template->render(messages, /*add_generation_prompt=*/false);
  } catch (const Error&) {
    return std::nullopt;  // a template with rules of its own about conversations: not judged
  }
  const size_t at = rendered.rfind(kProbeReply);
  if (at == std::string::npos) return std::nullopt;
  const std::vector<int32_t> closing = codec.encode(rendered.substr(at + kProbeReply.size()));
  if (closing.empty() || !tokenizer.is_special(closing.front())) return std::nullopt;
  return EndOfTurnToken{closing.front(), tokenizer.token_text(closing.front())};
}

void check_turns_end(const TokenCodec& codec, const ModelConfig& config,
                     const std::vector<std::string>& stop_strings, const std::string& who) {
  const std::optional<EndOfTurnToken> end = end_of_turn_token(codec);
  if (!end || end->id == config.eos_token_id) return;
  std::string stops;
  for (const std::string& stop : stop_strings) {
    if (!stop.empty() && end->text.find(stop) != std::string::npos) return;
    stops += (stops.empty() ? "" : ", ") + quoted(stop);
  }
  std::string eos = "no eos_token_id";
  if (config.eos_token_id >= 0) {
    eos = "eos_token_id " + std::to_string(config.eos_token_id);
    const auto* tokenizer_codec = dynamic_cast<const TokenizerCodec*>(&codec);
    if (tokenizer_codec && config.eos_token_id < tokenizer_codec->tokenizer().vocab_size())
      eos += " (" +
             quoted(tokenizer_codec->tokenizer().token_text(
                 static_cast<int32_t>(config.eos_token_id))) +
             ")";
  }
  fail(ErrorKind::kInvalidArgument, who, ": the chat template ends a turn with ", quoted(end->text),
       " (id ", end->id, ") but generation stops only on ", eos,
       stops.empty() ? std::string() : " and the task's stop strings " + stops,
       ": every response would run to max_new_tokens. Set \"eos_token_id\": ", end->id,
       " in the model's config.json (`stoa model init --tokenizer DIR` writes it)");
}

}  // namespace stoa::env
