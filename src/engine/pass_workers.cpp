#include "engine/pass_workers.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#if defined(__linux__)
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#include <sys/resource.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#endif

namespace stoa::engine {

namespace {

thread_local PassWorkers* t_pass = nullptr;

// Sleep until *word != expected (or a spurious wake). On Linux a bare futex: libstdc++'s
// std::atomic::wait first spins and then calls sched_yield() a dozen times, and on a busy machine
// each yield hands the core to another process for a whole slice (measured: 8x slower batched
// decode than ThreadPool's condition variable at load 17).
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
#else
  word.wait(expected, std::memory_order_acquire);
#endif
}

void futex_wake_all(std::atomic<uint32_t>& word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
          nullptr, 0);
#else
  word.notify_all();
#endif
}

// How long a thread may spin before it sleeps on a futex (workers waiting for the next
// operation, the caller waiting for the workers). On an idle machine the threads finish their
// shares within microseconds of each other and the serial stretches between operations are
// microseconds at decode sizes, so spinning hands over every operation without a syscall. On an
// oversubscribed machine the partner is often descheduled, and spinning for it costs a
// scheduler slice per operation (measured at load 15-18 on 2 cores: a fixed 1 ms budget made
// decode 10x slower; even an adaptive 2-200 us budget lost 30% to not spinning at all), while a
// futex sleeper gets woken and scheduled promptly. So each pass decides (run_pass_raw): spin
// (STOA_SPIN_US, default 200 us; 0: never) only while the calling thread has not been preempted
// in recent passes — involuntary context switches are the kernel telling us the cores are
// oversubscribed.
int64_t max_spin_ns() {
  static const int64_t ns = [] {
    const char* env = std::getenv("STOA_SPIN_US");
    const long us = env ? std::atol(env) : 200;
    return static_cast<int64_t>(us > 0 ? us : 0) * 1000;
  }();
  return ns;
}

// Involuntary context switches of the calling thread so far (0 where not available).
long preemptions() {
#if defined(__linux__)
  rusage ru{};
  if (getrusage(RUSAGE_THREAD, &ru) == 0) return ru.ru_nivcsw;
#endif
  return 0;
}

// How often recent passes were preempted: an exponential average of 0 (calm) / 1 (the caller
// was preempted during the pass) with weight kPreemptWeight for the newest pass; passes spin
// only while it is below kSpinBelow. A single preemption (a page fault's reschedule, a kernel
// thread) then costs one pass without spinning, a machine that preempts every pass or every
// other one never spins. (The first rule — 8 passes without spinning after any preemption —
// cost a quiet machine a quarter of a 32-step decode after each prefill: bench-qwen3 b1 at 2
// threads 204-225 tok/s with 64 steps, 264-285 with 128.)
constexpr double kPreemptWeight = 0.25;
constexpr double kSpinBelow = 0.2;
thread_local double t_preempt_rate = 0.0;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Spins until pred() holds or `budget_ns` is spent; returns pred()'s last value. The clock is
// read every 32 iterations only.
template <typename Pred>
bool spin_until(int64_t budget_ns, Pred&& pred) {
  if (budget_ns <= 0) return pred();
  const int64_t deadline = now_ns() + budget_ns;
  for (uint32_t i = 1;; ++i) {
    if (pred()) return true;
    cpu_relax();
    if ((i & 31) == 0 && now_ns() >= deadline) return pred();
  }
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
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(generation_);
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
  uint32_t done = 0;
  auto all_done = [&] {
    done = done_.load(std::memory_order_acquire);
    return done == static_cast<uint32_t>(others);
  };
  if (!spin_until(spin_ns_, all_done)) {
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    while (!all_done()) futex_wait(done_, done);
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
    if (!spin_until(spin_ns_, posted)) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while (!posted()) futex_wait(generation_, seen);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = g;
    if (exit_) return;
    run_own(index);
    // seq_cst pairs with the caller's seq_cst store of caller_sleeping_ (as in post()).
    done_.fetch_add(1, std::memory_order_seq_cst);
    if (caller_sleeping_.load(std::memory_order_seq_cst)) futex_wake_all(done_);
  }
}

namespace detail {

void run_pass_raw(ThreadPool& pool, void (*body)(void*), void* ctx) {
  if (pool.size() == 1 || t_pass != nullptr) {
    body(ctx);
    return;
  }
  PassWorkers pass(pool);
  const long preempted_before = preemptions();
  const int64_t spin_ns = t_preempt_rate >= kSpinBelow ? 0 : max_spin_ns();
  pass.set_spin_ns(spin_ns);
  // The same policy for the wait between passes (a decode loop's next step).
  pool.set_spin_ns(spin_ns);
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
  const double preempted = preemptions() != preempted_before ? 1.0 : 0.0;
  t_preempt_rate = (1.0 - kPreemptWeight) * t_preempt_rate + kPreemptWeight * preempted;
  if (error) std::rethrow_exception(error);
}

}  // namespace detail

}  // namespace stoa::engine
