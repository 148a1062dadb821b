#include "roles/worker/hub_task.h"

#include "core/error.h"

namespace stoa::worker {

HubTask::HubTask(net::HubClient& hub, std::string name, std::vector<std::string> stop_strings)
    : hub_(hub), name_(std::move(name)), stop_strings_(std::move(stop_strings)) {
  STOA_CHECK(!stop_strings_.empty(), ErrorKind::kInvalidArgument, "the hub's task '", name_,
             "' came without stop strings: this hub cannot serve its task to workers without "
             "its tools; give the worker the task's own options (e.g. --index)");
}

namespace {

// The hub's task failing, or the hub unreachable after the client's retries, is the environment
// failing for this worker (env/task.h): the episode is given up, the worker goes on.
template <typename F>
auto through_hub(F&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNetwork) throw;
    throw env::EnvironmentError(cat("the hub's task: ", e.what()));
  }
}

}  // namespace

std::string HubTask::user_prompt(const env::QaItem& problem) const {
  {
    std::lock_guard<std::mutex> lock(prompts_mutex_);
    for (const auto& [id, prompt] : prompts_)
      if (id == problem.id) return prompt;
  }
  std::string prompt = through_hub([&] { return hub_.task_prompt(problem.id); });
  std::lock_guard<std::mutex> lock(prompts_mutex_);
  if (prompts_.size() >= kPromptCache) prompts_.pop_front();
  prompts_.emplace_back(problem.id, prompt);
  return prompt;
}

env::TurnResult HubTask::on_turn(const env::QaItem& problem, std::string_view turn_text,
                                 bool tools_allowed) const {
  const net::TaskStepReply reply = through_hub(
      [&] { return hub_.task_step(problem.id, std::string(turn_text), tools_allowed); });
  env::TurnResult r;
  r.action = reply.kind == "tool"     ? env::ActionKind::kToolCall
             : reply.kind == "answer" ? env::ActionKind::kAnswer
                                      : env::ActionKind::kInvalid;
  r.tool = reply.tool;
  r.content = reply.content;
  r.done = reply.done;
  r.observation = {reply.observation_head, reply.observation_body, reply.observation_tail};
  return r;
}

double HubTask::reward(std::string_view, const std::vector<std::string>&) const {
  fail(ErrorKind::kUnsupported, "the hub recomputes every reward; a worker does not score");
}

}  // namespace stoa::worker
