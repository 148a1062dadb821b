// The run's task as a worker without its tools runs it: every prompt and every turn's decision
// comes from the hub (net/task_protocol.h, roles/hub/task_proxy.h), which runs the task itself —
// its search index, the operator's environment server. The volunteer installs nothing for the
// task, and the task's rules are the hub's by construction. A worker started with options of
// its own (`--index`, `--task-option`) builds the task locally instead (worker.cpp).
#pragma once
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "env/task.h"
#include "net/hub_client.h"

namespace stoa::worker {

class HubTask final : public env::Task {
 public:
  // `hub` must outlive the task; `name` and `stop_strings` as the join reply gave them.
  HubTask(net::HubClient& hub, std::string name, std::vector<std::string> stop_strings);

  std::string name() const override { return name_; }
  // Asked of the hub once per problem: a lease's G samples share their prompt, and the hub's is a
  // function of the problem alone (the last kPromptCache problems are kept).
  std::string user_prompt(const env::QaItem& problem) const override;
  const std::vector<std::string>& stop_strings() const override { return stop_strings_; }
  env::TurnResult on_turn(const env::QaItem& problem, std::string_view turn_text,
                          bool tools_allowed) const override;
  // The worker never scores its own rollouts: the hub recomputes every reward from the
  // transcript (docs/architecture.md). Throws kUnsupported.
  double reward(std::string_view response_text,
                const std::vector<std::string>& golden_answers) const override;

 private:
  static constexpr size_t kPromptCache = 64;

  net::HubClient& hub_;
  std::string name_;
  std::vector<std::string> stop_strings_;
  mutable std::mutex prompts_mutex_;
  mutable std::deque<std::pair<std::string, std::string>>
      prompts_;  // problem id, prompt; newest last
};

}  // namespace stoa::worker
