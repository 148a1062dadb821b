// Spinning workers for one forward pass.
//
// A decode step is ~100-300 small parallel operations (7 matmuls per layer, attention, the
// vocabulary projection); at batch 1 each takes 10-100 us. ThreadPool::run wakes its workers
// through a condition variable and waits on another, which costs 10-50 us per operation — as
// much as the operation itself. run_pass() instead takes the pool's threads ONCE per pass (one
// ThreadPool::run) and keeps them spinning on an atomic generation counter between operations,
// as llama.cpp's threads do during a graph: handing out an operation is a few cache-line
// transfers. A thread that waits longer than a short budget (200 us; STOA_SPIN_US) sleeps on a
// futex, and a pass does not spin at all while the machine is oversubscribed (the caller was
// preempted in one of the last passes): spinning for a descheduled partner costs a scheduler
// slice per operation.
//
// The blocks do not see the difference: engine::parallel_for / engine::parallel_run route to the
// pass in flight on this thread for this pool, and fall back to the pool itself otherwise. Work
// is split exactly as ThreadPool splits it (task t on thread t % size()), and nothing computed
// depends on the split anyway (kernels' batch/row-split invariance).
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <utility>

#include "core/thread_pool.h"

namespace stoa::engine {

class PassWorkers {
 public:
  using Trampoline = void (*)(void*, int);

  PassWorkers(ThreadPool& pool) : pool_(&pool), size_(pool.size()) {}
  PassWorkers(const PassWorkers&) = delete;
  PassWorkers& operator=(const PassWorkers&) = delete;

  ThreadPool* pool() const { return pool_; }
  int size() const { return size_; }

  // Calling thread (index 0) only: runs fn(ctx, task) for tasks [0, tasks), task t on thread
  // t % size(); returns when all are done.
  void run(int tasks, Trampoline fn, void* ctx);
  // Thread `index` (>= 1) serves operations until finish().
  void serve(int index);
  // Releases the workers (calling thread, after the last run()).
  void finish();
  // How long a waiting thread spins before it sleeps (set before the pass starts).
  void set_spin_ns(int64_t ns) { spin_ns_ = ns; }

 private:
  void post(int tasks, Trampoline fn, void* ctx, bool exit);
  void run_own(int index) const;

  ThreadPool* pool_;
  int size_;
  // The operation in flight; written by the calling thread before it bumps generation_.
  int tasks_ = 0;
  Trampoline fn_ = nullptr;
  void* ctx_ = nullptr;
  bool exit_ = false;
  int64_t spin_ns_ = 0;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<uint32_t> done_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_sleeping_{false};
};

// The pass this thread is running for `pool`, or null.
PassWorkers* current_pass(const ThreadPool& pool);

namespace detail {
void run_pass_raw(ThreadPool& pool, void (*body)(void*), void* ctx);
}

// Runs body() on the calling thread with the pool's other threads spinning as PassWorkers for
// the duration; engine::parallel_* calls inside body() use them. Exceptions from body()
// propagate (after the workers are released). Nested calls run body() directly.
template <typename Body>
void run_pass(ThreadPool& pool, Body&& body) {
  auto trampoline = [](void* ctx) { (*static_cast<Body*>(ctx))(); };
  detail::run_pass_raw(pool, trampoline, &body);
}

// ThreadPool::run, through the pass in flight when there is one.
template <typename Fn>
void parallel_run(ThreadPool& pool, int tasks, Fn&& fn) {
  if (PassWorkers* pass = current_pass(pool)) {
    auto trampoline = [](void* ctx, int task) { (*static_cast<Fn*>(ctx))(task); };
    pass->run(tasks, trampoline, &fn);
  } else {
    pool.run(tasks, std::forward<Fn>(fn));
  }
}

// ThreadPool::parallel_for (same split: size() contiguous chunks rounded to `align`), through
// the pass in flight when there is one.
template <typename Fn>
void parallel_for(ThreadPool& pool, int64_t n, int64_t align, Fn&& fn) {
  const int parts = pool.size();
  int64_t chunk = (n + parts - 1) / parts;
  if (align > 1) chunk = (chunk + align - 1) / align * align;
  parallel_run(pool, parts, [&](int task) {
    const int64_t begin = static_cast<int64_t>(task) * chunk;
    const int64_t end = begin + chunk < n ? begin + chunk : n;
    if (begin < end) fn(begin, end);
  });
}

// fn(begin, end) over [0, n): split as parallel_for does when every thread gets at least
// `min_per_task` items, else one call on the calling thread (handing out an operation costs
// microseconds: a decode step's small element-wise operations are cheaper done in place). Only
// for work whose results do not depend on the split (element-wise or row-wise kernels).
template <typename Fn>
void parallel_chunks(ThreadPool& pool, int64_t n, int64_t min_per_task, int64_t align, Fn&& fn) {
  if (n <= 0) return;
  if (pool.size() == 1 || n < min_per_task * pool.size()) {
    fn(int64_t{0}, n);
    return;
  }
  parallel_for(pool, n, align, std::forward<Fn>(fn));
}

}  // namespace stoa::engine
