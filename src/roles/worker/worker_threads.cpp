#include "roles/worker/worker_threads.h"

#include <exception>
#include <utility>

namespace stoa::worker {

bool wait_for_stop(const std::stop_token& stop, std::chrono::milliseconds duration) {
  // Nothing else notifies this variable: only the stop request (through the stop_callback the
  // wait registers) or the timeout end the wait.
  std::mutex mutex;
  std::condition_variable_any stop_requested;
  std::unique_lock lock(mutex);
  return stop_requested.wait_for(lock, stop, duration, [] { return false; }) ||
         stop.stop_requested();
}

WorkerThreads::WorkerThreads(net::HubClient& hub, std::chrono::milliseconds hub_grace)
    : hub_(hub), hub_grace_(hub_grace), uncaught_at_start_(std::uncaught_exceptions()) {}

WorkerThreads::~WorkerThreads() {
  stop_within(std::uncaught_exceptions() > uncaught_at_start_ ? std::chrono::milliseconds{0}
                                                              : hub_grace_);
}

void WorkerThreads::start_hub_loop(Loop loop) {
  // Counted under the lock the loop's end takes: it cannot be told ended before it is counted.
  std::lock_guard counting(mutex_);
  threads_.emplace_back([this, loop = std::move(loop)](std::stop_token stop) {
    loop(stop);
    std::lock_guard ending(mutex_);
    --hub_loops_running_;
    hub_loop_ended_.notify_all();
  });
  ++hub_loops_running_;
}

void WorkerThreads::start(Loop loop) {
  threads_.emplace_back(std::move(loop));
}

void WorkerThreads::stop() {
  stop_within(hub_grace_);
}

void WorkerThreads::stop_within(std::chrono::milliseconds hub_grace) {
  if (threads_.empty()) return;
  for (std::jthread& thread : threads_) thread.request_stop();
  {
    std::unique_lock lock(mutex_);
    if (!hub_loop_ended_.wait_for(lock, hub_grace, [this] { return hub_loops_running_ == 0; }))
      hub_.http().cancel();
  }
  for (std::jthread& thread : threads_) thread.join();
  threads_.clear();
}

}  // namespace stoa::worker
