#include "env/episode.h"

#include "core/error.h"

namespace stoa::env {

Episode::Episode(const Task& task, const QaItem& problem, const TokenCodec& codec,
                 EpisodeConfig config)
    : task_(task), problem_(problem), codec_(codec), config_(config) {
  STOA_CHECK(config.max_turns >= 0, ErrorKind::kInvalidArgument, "episode: max_turns must be >= 0");
  STOA_CHECK(config.max_observation_tokens >= 0, ErrorKind::kInvalidArgument,
             "episode: max_observation_tokens must be >= 0");
  prompt_text_ = apply_chat_template(codec, task.user_prompt(problem));
  tokens_ = codec.encode(prompt_text_);
  mask_.assign(tokens_.size(), 0);
  prompt_length_ = tokens_.size();
}

size_t Episode::stop_position(std::string_view turn_text) const {
  size_t best = std::string_view::npos;
  for (const auto& stop : task_.stop_strings()) {
    size_t at = turn_text.find(stop);
    if (at != std::string_view::npos && (best == std::string_view::npos || at + stop.size() < best))
      best = at + stop.size();
  }
  return best;
}

std::vector<int32_t> Episode::encode_observation(const ObservationParts& obs,
                                                 bool* truncated) const {
  *truncated = false;
  std::vector<int32_t> whole = codec_.encode(obs.joined());
  size_t budget = static_cast<size_t>(config_.max_observation_tokens);
  if (whole.size() <= budget) return whole;
  // Too long: keep head and tail whole (so the model always sees a framed observation close,
  // e.g. search's </information>) and cut the body to what is left of the budget, at a token
  // boundary.
  *truncated = true;
  std::vector<int32_t> head = codec_.encode(obs.head);
  std::vector<int32_t> tail = codec_.encode(obs.tail);
  if (head.size() + tail.size() >= budget) {
    whole.resize(budget);  // pathological budget: plain prefix cut, like Search-R1
    return whole;
  }
  std::vector<int32_t> body = codec_.encode(obs.body);
  body.resize(std::min(body.size(), budget - head.size() - tail.size()));
  std::vector<int32_t> out = std::move(head);
  out.insert(out.end(), body.begin(), body.end());
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

Decision Episode::step(std::span<const int32_t> generated) {
  STOA_CHECK(!done_, ErrorKind::kInvalidArgument, "episode for problem ", problem_.id,
             " is already done");
  bool tools_allowed = !final_turn();
  tokens_.insert(tokens_.end(), generated.begin(), generated.end());
  mask_.insert(mask_.end(), generated.size(), 1);
  ++turns_;

  std::string text = codec_.decode(generated);
  size_t stop = stop_position(text);
  if (stop != std::string::npos) text.resize(stop);
  TurnResult result = task_.on_turn(problem_, text, tools_allowed);

  Decision decision;
  decision.action = result.action;
  decision.tool = std::move(result.tool);
  decision.content = std::move(result.content);
  if (result.done || !tools_allowed) {
    done_ = true;
    decision.done = true;
    return decision;
  }
  if (!result.observation.joined().empty()) {
    decision.appended = encode_observation(result.observation, &decision.observation_truncated);
    tokens_.insert(tokens_.end(), decision.appended.begin(), decision.appended.end());
    mask_.insert(mask_.end(), decision.appended.size(), 0);
  }
  decision.next_turn_final = final_turn();
  return decision;
}

std::string Episode::response_text() const {
  return codec_.decode(std::span<const int32_t>(tokens_).subspan(prompt_length_));
}

double Episode::reward() const {
  return task_.reward(response_text(), problem_.golden_answers);
}

}  // namespace stoa::env
