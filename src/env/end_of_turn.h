// The token a model's turn ends with, as its chat template writes it, and the check at start that
// generation stops on it. A model whose config names another EOS (a `stoa model init` preset's
// placeholder id 2 — a byte in a trained tokenizer — beside a template that ends turns with
// <|im_end|>) generates every response to max_new_tokens: the run, the worker and `stoa eval`
// refuse it before spending an hour on it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "env/token_codec.h"
#include "model/config.h"

namespace stoa::env {

struct EndOfTurnToken {
  int32_t id = -1;
  std::string text;  // its vocabulary spelling, e.g. "<|im_end|>"
};

// The special token the codec's chat template writes right after an assistant message (rendered
// with a probe message: `<|im_end|>` for ChatML, Qwen3 and LFM2); without a template, <|im_end|>
// when the codec speaks ChatML. nullopt for a byte codec, a template that ends a turn with no
// special token, or one that refuses the probe conversation.
std::optional<EndOfTurnToken> end_of_turn_token(const TokenCodec& codec);

// Refuses (kInvalidArgument, starting with `who`, naming both tokens and the fix) a model whose
// end-of-turn token (above) generation would not stop on: neither config.eos_token_id nor a token
// whose text holds one of `stop_strings` (the task's, env/task.h).
void check_turns_end(const TokenCodec& codec, const ModelConfig& config,
                     const std::vector<std::string>& stop_strings, const std::string& who);

}  // namespace stoa::env
