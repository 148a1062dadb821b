#include "engine/pass_workers.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace stoa::engine {

namespace {

thread_local PassWorkers* t_pass = nullptr;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// How long a thread may spin before it sleeps on a futex (workers waiting for the next
// operation, the caller waiting for the workers). On an idle machine the threads finish their
// shares within microseconds of each other and the serial stretches between operations are
// microseconds at decode sizes, so spinning hands over every operation without a syscall. On an
// oversubscribed machine the partner is often descheduled, and spinning for it costs a
// scheduler slice per operation (measured: 10x slower decode with a fixed 1 ms budget at load
// 18 on 2 cores), while a futex sleeper gets woken and scheduled promptly. Hence an adaptive
// budget per thread: it halves each time a spin ends in a sleep (down to kMinSpin) and doubles
// each time the partner arrives while spinning (up to the maximum, STOA_SPIN_US, default
// 200 us; 0: never spin).
constexpr int64_t kMinSpinNs = 2000;

int64_t max_spin_ns() {
  static const int64_t ns = [] {
    const char* env = std::getenv("STOA_SPIN_US");
    const long us = env ? std::atol(env) : 200;
    return static_cast<int64_t>(us > 0 ? us : 0) * 1000;
  }();
  return ns;
}

thread_local int64_t t_spin_ns = -1;  // this thread's current budget; -1: not yet set

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Spins until pred() holds or this thread's budget is spent; returns pred()'s last value and
// adapts the budget. The clock is read every 32 iterations only.
template <typename Pred>
bool spin_until(Pred&& pred) {
  const int64_t max_ns = max_spin_ns();
  if (max_ns == 0) return pred();
  if (t_spin_ns < 0) t_spin_ns = max_ns;
  const int64_t deadline = now_ns() + t_spin_ns;
  for (uint32_t i = 1;; ++i) {
    if (pred()) {
      t_spin_ns = std::min(max_ns, t_spin_ns * 2);
      return true;
    }
    cpu_relax();
    if ((i & 31) == 0 && now_ns() >= deadline) break;
  }
  t_spin_ns = std::max(kMinSpinNs, t_spin_ns / 2);
  return pred();
}

}  // namespace

PassWorkers* current_pass(const ThreadPool& pool) {
  PassWorkers* p = t_pass;
  return p && p->pool() == &pool ? p : nullptr;
}

void PassWorkers::post(int tasks, Trampoline fn, void* ctx, bool exit) {
  tasks_ = tasks;
  fn_ = fn;
  ctx_ = ctx;
  exit_ = exit;
  done_.store(0, std::memory_order_relaxed);
  // seq_cst pairs with the sleeper's seq_cst increment: either it sees the new generation
  // before sleeping, or we see it counted and wake it.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
}

void PassWorkers::run_own(int index) const {
  for (int task = index; task < tasks_; task += size_) fn_(ctx_, task);
}

void PassWorkers::run(int tasks, Trampoline fn, void* ctx) {
  if (tasks <= 0) return;
  if (size_ == 1 || tasks == 1) {
    for (int t = 0; t < tasks; ++t) fn(ctx, t);
    return;
  }
  post(tasks, fn, ctx, false);
  run_own(0);
  const int others = size_ - 1;
  int done = 0;
  auto all_done = [&] {
    done = done_.load(std::memory_order_acquire);
    return done == others;
  };
  if (!spin_until(all_done)) {
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    while (!all_done()) done_.wait(done, std::memory_order_acquire);
    caller_sleeping_.store(false, std::memory_order_relaxed);
  }
}

void PassWorkers::finish() {
  post(0, nullptr, nullptr, true);
}

void PassWorkers::serve(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = seen;
    auto posted = [&] {
      g = generation_.load(std::memory_order_acquire);
      return g != seen;
    };
    if (!spin_until(posted)) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while (!posted()) generation_.wait(seen, std::memory_order_acquire);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = g;
    if (exit_) return;
    run_own(index);
    // seq_cst pairs with the caller's seq_cst store of caller_sleeping_ (as in post()).
    done_.fetch_add(1, std::memory_order_seq_cst);
    if (caller_sleeping_.load(std::memory_order_seq_cst)) done_.notify_one();
  }
}

namespace detail {

void run_pass_raw(ThreadPool& pool, void (*body)(void*), void* ctx) {
  if (pool.size() == 1 || t_pass != nullptr) {
    body(ctx);
    return;
  }
  PassWorkers pass(pool);
  std::exception_ptr error;
  pool.run(pool.size(), [&](int task) {
    if (task != 0) {
      pass.serve(task);
      return;
    }
    t_pass = &pass;
    try {
      body(ctx);
    } catch (...) {
      error = std::current_exception();
    }
    t_pass = nullptr;
    pass.finish();
  });
  if (error) std::rethrow_exception(error);
}

}  // namespace detail

}  // namespace stoa::engine
