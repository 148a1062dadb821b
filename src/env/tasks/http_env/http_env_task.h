// A task whose rules live in an operator's environment server, spoken to over HTTP
// (docs/environment-protocol.md): the operator writes a task in any language and runs it beside
// the hub, and no volunteer installs anything — workers reach the environment only through the
// hub (roles/hub/turn_proxy: the hub runs this task for them), and the hub's replay verification
// calls it again for the same (problem, action).
//
//   GET  /v1/info    → {"protocol": 1, "name", "stop_strings": [...], "version"}  (at construction,
//                    then again every version_check_s while rewards are asked for)
//   POST /v1/prompt  {"problem"} → {"prompt"}                               (reset)
//   POST /v1/step    {"problem", "action", "tools_allowed"} → {"kind": "tool"|"answer"|"invalid",
//                    "tool", "content", "done", "observation": {"head", "body", "tail"}}
//   POST /v1/reward  {"response", "golden_answers"} → {"reward"}
//
// Replay verification needs the environment to be a function of (problem, action): the task
// keeps a bounded memory of the hash of every step answer it was given and, when the same
// question is answered differently, throws EnvironmentError naming the problem — the replay
// reports the environment, not the worker (roles/verify/replay_validator.cpp), and the operator
// sees the count (nondeterministic_steps()).
//
// An environment whose rules change mid-run (a reward function edited and the server restarted)
// would make the rewards before and after incomparable without anyone noticing: the optional
// "version" of /v1/info is recorded at construction (the hub's task: the run's start) and checked
// again at most every version_check_s on the way to a reward; a change is logged as an error, once
// per new version, and counted (version_changes()).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "env/task.h"
#include "env/task_registry.h"

namespace stoa::env {

struct HttpEnvOptions {
  std::string url;        // http://host:port
  double timeout_s = 10;  // per call: connect, read and write
  size_t max_reply_bytes = 1 << 20;
  size_t memo_entries = 1 << 16;  // (problem, action) → answer hashes remembered
  double version_check_s = 30;    // least time between two looks at /v1/info's version
};

class HttpEnvTask final : public Task {
 public:
  // Fetches /v1/info; EnvironmentError when the server is unreachable or speaks another protocol.
  explicit HttpEnvTask(HttpEnvOptions options);

  std::string name() const override { return "http"; }
  std::string user_prompt(const QaItem& problem) const override;
  const std::vector<std::string>& stop_strings() const override { return stop_strings_; }
  TurnResult on_turn(const QaItem& problem, std::string_view turn_text,
                     bool tools_allowed) const override;
  double reward(std::string_view response_text,
                const std::vector<std::string>& golden_answers) const override;

  const std::string& environment_name() const { return env_name_; }
  int64_t nondeterministic_steps() const { return nondeterministic_.load(); }
  // /v1/info's "version" at construction ("" when the environment gives none).
  const std::string& environment_version() const { return version_; }
  // Times a later /v1/info named a version other than the last one seen.
  int64_t version_changes() const { return version_changes_.load(); }

 private:
  nlohmann::json call(const std::string& method, const std::string& path,
                      const nlohmann::json& body) const;
  void remember(const std::string& key, uint64_t answer_hash) const;
  // Looks at /v1/info's version when version_check_s has passed since the last look.
  void check_version() const;

  HttpEnvOptions options_;
  std::string origin_;
  std::string env_name_;
  std::vector<std::string> stop_strings_;
  mutable std::mutex memo_mutex_;
  mutable std::list<std::string> memo_order_;  // oldest first
  mutable std::unordered_map<std::string, std::pair<uint64_t, std::list<std::string>::iterator>>
      memo_;
  mutable std::atomic<int64_t> nondeterministic_{0};
  std::string version_;
  mutable std::mutex version_mutex_;  // one look at a time; guards the two below
  mutable std::string last_version_;  // the version the last look saw
  mutable std::chrono::steady_clock::time_point version_checked_;
  mutable std::atomic<int64_t> version_changes_{0};
};

// The registry's factory for "http". Options (each machine's own): url (required), timeout_s.
std::unique_ptr<Task> make_http_env_task(const TaskOptions& options);
TaskKeys http_env_task_keys();

}  // namespace stoa::env
