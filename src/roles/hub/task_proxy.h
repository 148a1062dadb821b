// The run's task, served to workers that hold none of its tools (net/task_protocol.h): the hub
// renders a problem's prompt and decides each turn with its own task — the search index, the
// operator's environment server — so a volunteer needs nothing but the worker binary and the join
// string. A worker may ask only about problems it holds an open lease on, at a bounded rate, with
// a bounded action; the task's own failures (an environment that is down or contradicts itself)
// are answered 502 and the worker retries, never trusted to decide anything itself.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "net/task_protocol.h"
#include "roles/hub/hub.h"
#include "roles/hub/identity/rate_limit.h"

namespace stoa::hub {

class TaskProxy {
 public:
  // `hub` must outlive the proxy; per_worker limits each worker's task calls.
  TaskProxy(Hub& hub, RateLimit per_worker);

  // RequestError: 403 when `caller` is not the request's worker_id, 404 when the worker holds no
  // open lease on the prompt, 429 over the rate, 502 when the task fails.
  std::string prompt(const std::string& caller, const net::TaskPromptRequest& request);
  net::TaskStepReply step(const std::string& caller, const net::TaskStepRequest& request);

  int64_t calls() const { return calls_.load(); }
  int64_t failures() const { return failures_.load(); }

 private:
  env::QaItem leased_problem(const std::string& caller, const std::string& worker_id,
                             const std::string& prompt_id);

  Hub& hub_;
  std::mutex mutex_;  // the limiter
  RateLimiter limiter_;
  std::atomic<int64_t> calls_{0}, failures_{0};
};

}  // namespace stoa::hub
