// A small fixed pool of threads with a bounded queue, for the hub's request handlers that may
// block (the hub's mutex, SQLite commits, reward recomputation): the HTTP I/O thread hands them
// over here and never blocks itself. A full queue refuses new work (the server answers 503 with
// Retry-After) instead of growing without bound.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace stoa::hub {

class WorkPool {
 public:
  WorkPool(int threads, size_t max_queued);
  ~WorkPool();  // stop()
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // False when the queue is full or the pool is stopped (the task is not run).
  bool try_submit(std::function<void()> task);
  // Finishes the tasks running now, drops the queued ones, joins the threads. Idempotent.
  void stop();
  // CPU seconds the pool's threads have used so far (the hub bench reports it).
  double cpu_seconds() const;

 private:
  void loop();

  size_t max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// CPU seconds used so far by a running thread of this process.
double thread_cpu_seconds(std::thread& thread);

}  // namespace stoa::hub
