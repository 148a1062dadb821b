// A task, as the rollout loop sees it: a prompt for a problem, what to do after each generated
// turn, and a reward computed from the transcript alone. Adding a task means implementing this
// interface (under env/tasks/<name>/) and registering it by name (env/tasks/builtin_tasks.cpp);
// the token-level bookkeeping (chat template, observation truncation, loss mask, turn limits)
// lives in Episode and is shared by every task.
//
// The vocabulary is deliberately small so that any turn-based task fits: in each turn the model
// calls one of the task's tools (search, a calculator, ...), gives its final answer, or does
// neither; the task may append an observation the model reads before its next turn. A single-turn
// task answers in its first turn; a tool-less task never returns kToolCall.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "env/dataset.h"

namespace stoa::env {

// What a task throws when what it stands on failed rather than the model's text: a server it
// calls is unreachable, answers an error, a malformed or oversized reply, misses its deadline,
// or answers the same (problem, action) differently. Not a worker's fault: the hub's replay
// verification reports it as the environment's (roles/hub/verification/rollout_audit.h
// kEnvironmentVerdict) and holds nothing against the rollout's author.
class EnvironmentError : public Error {
 public:
  explicit EnvironmentError(const std::string& message) : Error(ErrorKind::kNetwork, message) {}
};

// What the model did in one turn.
enum class ActionKind {
  kToolCall,  // called a tool (TurnResult::tool names it); the task appends its output
  kAnswer,    // gave the final answer; the episode ends
  kInvalid,   // neither (malformed or missing markup); the task may append a correction
};

// Text appended after a turn (the model does not generate it; loss-masked), in three parts so that
// Episode may truncate only the body to the observation token budget and a framed observation
// (search's "<information>...</information>") always keeps its frame.
struct ObservationParts {
  std::string head;
  std::string body;
  std::string tail;
  std::string joined() const { return head + body + tail; }
};

// What a task decided about one generated turn.
struct TurnResult {
  ActionKind action = ActionKind::kInvalid;
  std::string tool;              // kToolCall: which of the task's tools ("search", ...); else empty
  std::string content;           // the tool's input or the answer
  bool done = false;             // the episode ends here (an answer was given)
  ObservationParts observation;  // empty: nothing is appended
};

class Task {
 public:
  virtual ~Task() = default;
  // The name the task is registered under (env/task_registry.h); the hub sends it to workers.
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
