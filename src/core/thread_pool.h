// A persistent thread pool for compute kernels. The calling thread takes part, so a pool of size
// N runs N-1 background threads. run() does not allocate: hot loops (decode steps) may call it
// every step. Work is split statically (task i always runs the same range), which keeps results
// independent of timing.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace stoa {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(task) for every task in [0, tasks), spread over the pool; returns when all are done.
  // Task t runs on thread t % size(). fn must not throw.
  template <typename Fn>
  void run(int tasks, Fn&& fn) {
    auto trampoline = [](void* ctx, int task) { (*static_cast<Fn*>(ctx))(task); };
    run_raw(tasks, trampoline, &fn);
  }

  // Splits [0, n) into size() contiguous chunks (rounded to `align`), calls fn(begin, end).
  template <typename Fn>
  void parallel_for(int64_t n, int64_t align, Fn&& fn) {
    int parts = size();
    int64_t chunk = (n + parts - 1) / parts;
    if (align > 1) chunk = (chunk + align - 1) / align * align;
    run(parts, [&](int task) {
      int64_t begin = static_cast<int64_t>(task) * chunk;
      int64_t end = begin + chunk < n ? begin + chunk : n;
      if (begin < end) fn(begin, end);
    });
  }

  // A process-wide pool sized by STOA_THREADS or the hardware concurrency.
  static ThreadPool& global();

 private:
  using Trampoline = void (*)(void*, int);
  void run_raw(int tasks, Trampoline fn, void* ctx);
  void worker_loop(int index);
  void run_tasks_of(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  int tasks_ = 0;
  Trampoline fn_ = nullptr;
  void* ctx_ = nullptr;
  std::mutex run_mutex_;  // one run() at a time
};

}  // namespace stoa
