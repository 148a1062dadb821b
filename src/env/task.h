// A task, as the rollout loop sees it: a prompt for a problem, what to do after each generated
// turn, and a reward computed from the transcript alone. Adding a task means implementing this
// interface in one file; the token-level bookkeeping (chat template, observation truncation, loss
// mask, turn limits) lives in Episode and is shared by every task.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "env/dataset.h"
#include "env/tasks/search/search_protocol.h"

namespace stoa::env {

// What a task decided about one generated turn.
struct TurnResult {
  ActionKind action = ActionKind::kInvalid;
  std::string content;  // the query or the answer
  bool done = false;    // the episode ends here (an answer was given)
  // Text to append before the next turn (the model does not generate it; loss-masked). Only
  // observation.body may be truncated to respect the observation token budget.
  ObservationParts observation;
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  // The user message (before any chat template).
  virtual std::string user_prompt(const QaItem& problem) const = 0;
  // Generation stops at the first of these (the stop string is kept in the transcript).
  virtual const std::vector<std::string>& stop_strings() const = 0;
  // Decides about one turn's text (already cut at the stop string). With tools_allowed false
  // (the final turn) no tool may run: a tool call yields no observation.
  virtual TurnResult on_turn(const QaItem& problem, std::string_view turn_text,
                             bool tools_allowed) const = 0;
  // Pure function of the response text (everything the transcript holds after the prompt) and
  // the golden answers: the hub recomputes it from submitted transcripts.
  virtual double reward(std::string_view response_text,
                        const std::vector<std::string>& golden_answers) const = 0;
};

}  // namespace stoa::env
