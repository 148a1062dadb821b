#include "roles/hub/task_proxy.h"

#include "core/log.h"
#include "roles/hub/verification/verification.h"

namespace stoa::hub {

std::optional<env::QaItem> Hub::leased_problem(const std::string& worker_id,
                                               const std::string& prompt_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  // The open leases are few (max_open_groups groups, a lease or a few each): a scan is cheap.
  for (const auto& lease_id : book_.open_leases()) {
    const LeaseRow& l = book_.leases().at(lease_id);
    if (l.worker_id != worker_id) continue;
    auto g = book_.groups().find(l.group_id);
    if (g == book_.groups().end() || g->second.row.prompt_id != prompt_id) continue;
    return deps_.prompts.at(static_cast<size_t>(g->second.row.prompt_index));
  }
  // A check job it holds: the replay walks the same turns (verification/peer_checks.cpp).
  return verification_->checked_problem(worker_id, prompt_id);
}

TaskProxy::TaskProxy(Hub& hub, RateLimit per_worker) : hub_(hub), limiter_(per_worker) {}

env::QaItem TaskProxy::leased_problem(const std::string& caller, const std::string& worker_id,
                                      const std::string& prompt_id) {
  if (worker_id != caller) throw RequestError(403, "task: worker_id is not yours");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t wait_ms = limiter_.acquire(caller, hub_.now_ms());
    if (wait_ms > 0)
      throw RequestError(429, cat("task: worker ", caller, " is calling the task too fast"),
                         wait_ms);
  }
  std::optional<env::QaItem> problem = hub_.leased_problem(caller, prompt_id);
  if (!problem)
    throw RequestError(404, cat("task: worker ", caller, " holds no open lease on prompt '",
                                prompt_id.substr(0, 64), "'"));
  return *problem;
}

std::string TaskProxy::prompt(const std::string& caller, const net::TaskPromptRequest& request) {
  const env::QaItem problem = leased_problem(caller, request.worker_id, request.prompt_id);
  calls_.fetch_add(1);
  try {
    return hub_.deps().task->user_prompt(problem);
  } catch (const Error& e) {
    failures_.fetch_add(1);
    log_warn("hub", "task prompt for ", request.prompt_id, " failed: ", e.what());
    throw RequestError(502, cat("the run's task failed: ", e.what()));
  }
}

net::TaskStepReply TaskProxy::step(const std::string& caller, const net::TaskStepRequest& request) {
  const env::QaItem problem = leased_problem(caller, request.worker_id, request.prompt_id);
  calls_.fetch_add(1);
  env::TurnResult r;
  try {
    r = hub_.deps().task->on_turn(problem, request.action, request.tools_allowed);
  } catch (const Error& e) {
    failures_.fetch_add(1);
    log_warn("hub", "task step for ", request.prompt_id, " failed: ", e.what());
    throw RequestError(502, cat("the run's task failed: ", e.what()));
  }
  net::TaskStepReply out;
  out.kind = r.action == env::ActionKind::kToolCall ? "tool"
             : r.action == env::ActionKind::kAnswer ? "answer"
                                                    : "invalid";
  out.tool = r.tool;
  out.content = r.content;
  out.done = r.done;
  out.observation_head = r.observation.head;
  out.observation_body = r.observation.body;
  out.observation_tail = r.observation.tail;
  return out;
}

}  // namespace stoa::hub
