#include "roles/hub/http/work_pool.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>

namespace stoa::hub {

WorkPool::WorkPool(int threads, size_t max_queued) : max_queued_(std::max<size_t>(1, max_queued)) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { loop(); });
}

WorkPool::~WorkPool() {
  stop();
}

bool WorkPool::try_submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void WorkPool::stop() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  // `dropped` goes out of scope here, outside the lock: tasks may own objects whose destructors
  // take other locks.
}

double WorkPool::cpu_seconds() const {
  double total = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return 0;
  for (auto& t : threads_) total += thread_cpu_seconds(const_cast<std::thread&>(t));
  return total;
}

void WorkPool::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      task();
    } catch (...) {
      // A task owns its error handling (the server's turn every failure into a reply); one that
      // still throws must not take the pool thread, and with it the hub, down.
    }
  }
}

double thread_cpu_seconds(std::thread& thread) {
  if (!thread.joinable()) return 0;
  clockid_t clock;
  if (pthread_getcpuclockid(thread.native_handle(), &clock) != 0) return 0;
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace stoa::hub
