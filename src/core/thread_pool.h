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

// A pause inside a spin-wait loop (lets the sibling hyperthread run, saves power).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

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

  // How long (ns) a worker that finished its tasks, and the caller waiting for the workers,
  // spin before sleeping on the condition variables (0, the default: never). Between two decode
  // steps the gap is microseconds; a worker that slept must be woken and placed by the
  // scheduler every step, and right after another process loaded the cores it was measured to
  // land on the caller's core (bench-qwen3 batch 1 on 2 threads: 207-237 tok/s for 32 steps
  // after llama.cpp's run, 291-297 without it). The engine sets it per forward pass from its
  // preemption policy (engine/pass_workers.cpp): spinning on an oversubscribed machine costs.
  void set_spin_ns(int64_t ns) { spin_ns_.store(ns, std::memory_order_relaxed); }

 private:
  using Trampoline = void (*)(void*, int);
  void run_raw(int tasks, Trampoline fn, void* ctx);
  void worker_loop(int index);
  void run_tasks_of(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  // Written under mutex_; read without it only by the spin before a condition-variable wait.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int64_t> spin_ns_{0};
  bool stop_ = false;
  int tasks_ = 0;
  Trampoline fn_ = nullptr;
  void* ctx_ = nullptr;
  std::mutex run_mutex_;  // one run() at a time
};

}  // namespace stoa
