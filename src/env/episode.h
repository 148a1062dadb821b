// One multi-turn rollout of a task at the token level. The rollout loop (the worker) drives it:
//
//   Episode ep(task, problem, codec, config);
//   generate from ep.tokens() until a stop string (ep.stop_position) or the token budget;
//   Decision d = ep.step(generated_ids);        // appends them (loss mask 1) and decides
//   while (!d.done) { generate again from ep.tokens(); d = ep.step(...); }
//   ep.reward();
//
// The sequence is prompt (mask 0), then per turn the generated tokens (mask 1) and the
// observation the task appended (mask 0, truncated to max_observation_tokens). Generated tokens
// are kept exactly as sampled, even when the last one runs past the stop string, because each
// carries a behaviour log-probability; only the text handed to the task is cut at the stop.
// Turns: up to max_turns turns in which tools run, then one final turn in which they do not,
// as in Search-R1 (every turn counts, invalid ones included).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "env/task.h"
#include "env/token_codec.h"

namespace stoa::env {

struct EpisodeConfig {
  int max_turns = 4;                 // 2-4 in training, 5 in evaluation
  int max_observation_tokens = 500;  // Search-R1's max_obs_length
};

struct Decision {
  ActionKind action = ActionKind::kInvalid;
  std::string tool;               // kToolCall: which tool ran (TurnResult::tool)
  std::string content;            // the tool's input or the answer
  bool done = false;              // no further generation
  bool next_turn_final = false;   // the next generation is the final, tool-less turn
  std::vector<int32_t> appended;  // observation tokens appended after this turn (mask 0)
  bool observation_truncated = false;
};

class Episode {
 public:
  // task, problem and codec must outlive the episode.
  Episode(const Task& task, const QaItem& problem, const TokenCodec& codec, EpisodeConfig config);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  // 1 where the model generated the token (trained on), 0 for prompt and observations.
  const std::vector<uint8_t>& loss_mask() const { return mask_; }
  size_t prompt_length() const { return prompt_length_; }
  const std::string& prompt_text() const { return prompt_text_; }

  // End (in bytes) of the first stop string in a turn's decoded text, or npos: the engine checks
  // this as it streams tokens and stops once it is not npos.
  size_t stop_position(std::string_view turn_text) const;

  // Appends one turn's generated tokens and applies the task's decision. Throws kInvalidArgument
  // if called after the episode is done.
  Decision step(std::span<const int32_t> generated);

  bool done() const { return done_; }
  int turns() const { return turns_; }
  bool final_turn() const { return turns_ >= config_.max_turns; }
  // The transcript after the prompt (model turns and observations), decoded.
  std::string response_text() const;
  double reward() const;

 private:
  std::vector<int32_t> encode_observation(const ObservationParts& obs, bool* truncated) const;

  const Task& task_;
  const QaItem& problem_;
  const TokenCodec& codec_;
  EpisodeConfig config_;
  std::string prompt_text_;
  std::vector<int32_t> tokens_;
  std::vector<uint8_t> mask_;
  size_t prompt_length_ = 0;
  int turns_ = 0;
  bool done_ = false;
};

}  // namespace stoa::env
