#include "core/thread_pool.h"

#include <chrono>
#include <cstdlib>

namespace stoa {
namespace {

// Spins until done() holds or budget_ns has passed (the clock is read every 64 iterations).
template <typename Done>
void spin_for(int64_t budget_ns, Done&& done) {
  if (budget_ns <= 0) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(budget_ns);
  for (uint32_t i = 1; !done(); ++i) {
    cpu_relax();
    if ((i & 63) == 0 && std::chrono::steady_clock::now() >= deadline) return;
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads < 1) threads = 1;
  workers_.reserve(static_cast<size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool([] {
    const char* env = std::getenv("STOA_THREADS");
    int n = env ? std::atoi(env) : static_cast<int>(std::thread::hardware_concurrency());
    return n > 0 ? n : 1;
  }());
  return pool;
}

void ThreadPool::run_tasks_of(int index) {
  for (int task = index; task < tasks_; task += size()) fn_(ctx_, task);
}

void ThreadPool::run_raw(int tasks, Trampoline fn, void* ctx) {
  if (tasks <= 0) return;
  std::lock_guard<std::mutex> serial(run_mutex_);
  if (workers_.empty() || tasks == 1) {
    for (int t = 0; t < tasks; ++t) fn(ctx, t);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_ = tasks;
    fn_ = fn;
    ctx_ = ctx;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  run_tasks_of(0);
  spin_for(spin_ns_.load(std::memory_order_relaxed),
           [this] { return pending_.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    spin_for(spin_ns_.load(std::memory_order_relaxed),
             [&] { return generation_.load(std::memory_order_acquire) != seen; });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_tasks_of(index);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

}  // namespace stoa
