// The run's task served by the hub (docs/protocol.md, "The task through the hub"): a worker that
// holds none of the task's tools — no search index, no access to an operator's environment
// server — asks the hub for a problem's prompt and for each turn's decision, and the hub runs
// its own task for it. Only for problems the worker holds a lease on.
//
//   POST /v1/task/prompt {"worker_id", "prompt_id"} → {"prompt"}
//   POST /v1/task/step   {"worker_id", "prompt_id", "action", "tools_allowed"}
//        → {"kind": "tool"|"answer"|"invalid", "tool", "content", "done",
//           "observation": {"head", "body", "tail"}}
#pragma once
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace stoa::net {

// A turn's text is at most what one turn may generate; far above any real turn, and it bounds
// what a hostile worker can make the hub send to an environment.
constexpr size_t kMaxTaskActionBytes = 256 * 1024;
constexpr size_t kMaxTaskReplyBytes = 1 << 20;

struct TaskPromptRequest {
  std::string worker_id;
  std::string prompt_id;
};
struct TaskStepRequest {
  std::string worker_id;
  std::string prompt_id;
  std::string action;  // the turn's text, cut at the stop string
  bool tools_allowed = true;
};
struct TaskStepReply {
  std::string kind;  // "tool" | "answer" | "invalid"
  std::string tool;
  std::string content;
  bool done = false;
  std::string observation_head, observation_body, observation_tail;
};

nlohmann::json to_json(const TaskPromptRequest& m);
nlohmann::json to_json(const TaskStepRequest& m);
nlohmann::json to_json(const TaskStepReply& m);
// kInvalidArgument naming the message and the field for anything malformed or over the bounds.
TaskPromptRequest task_prompt_request_from_json(const nlohmann::json& j);
TaskStepRequest task_step_request_from_json(const nlohmann::json& j);
TaskStepReply task_step_reply_from_json(const nlohmann::json& j);
// {"prompt": ...}
std::string task_prompt_reply_from_json(const nlohmann::json& j);

}  // namespace stoa::net
