// The threads that keep a pipeline head's micro-batches in flight (roles/worker/
// micro_batch_threads.h): nothing runs before resume(); every thread's body runs, at the same
// time as the others'; pause() returns only when no body runs, and none starts until the next
// resume(); a body that throws stops every thread after its iteration and its error is the
// first one, cleared by the next resume().
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "roles/worker/micro_batch_threads.h"

namespace stoa::worker {
namespace {
using namespace std::chrono_literals;

TEST(MicroBatchThreads, RunOnlyBetweenResumeAndPauseAndAllAtOnce) {
  std::atomic<int> inside{0};
  std::atomic<int> most_inside{0};
  std::vector<std::atomic<int>> runs(3);
  MicroBatchThreads threads(3, [&](size_t i) {
    const int now = ++inside;
    for (int seen = most_inside; now > seen && !most_inside.compare_exchange_weak(seen, now);) {
    }
    std::this_thread::sleep_for(20ms);  // a pass down the chain
    ++runs[i];
    --inside;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(threads.iterations(), 0u) << "nothing runs before the first resume";

  threads.resume();
  std::this_thread::sleep_for(200ms);
  threads.pause();
  EXPECT_EQ(inside, 0) << "pause returns once no body runs";
  for (const auto& r : runs) EXPECT_GE(r, 2);
  EXPECT_EQ(most_inside, 3) << "every micro-batch's body ran at the same time";

  const uint64_t paused_at = threads.iterations();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(threads.iterations(), paused_at) << "none starts while paused";
  EXPECT_FALSE(threads.failed());
}

TEST(MicroBatchThreads, AFailureStopsEveryThreadAndIsReportedOnce) {
  std::atomic<bool> fail{true};
  std::atomic<int> after_failure{0};
  MicroBatchThreads threads(3, [&](size_t i) {
    std::this_thread::sleep_for(5ms);
    if (i == 1 && fail) throw std::runtime_error("the pipeline broke");
    if (!fail) ++after_failure;
  });
  threads.resume();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!threads.failed() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(threads.failed());
  const uint64_t at_failure = threads.iterations();
  std::this_thread::sleep_for(100ms);
  EXPECT_LE(threads.iterations(), at_failure + 2) << "the others stop after their iteration";
  threads.pause();
  try {
    std::rethrow_exception(threads.error());
    FAIL() << "no error kept";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the pipeline broke");
  }

  fail = false;  // the pipeline rebuilt: the next phase starts clean
  threads.resume();
  EXPECT_FALSE(threads.failed());
  std::this_thread::sleep_for(50ms);
  threads.pause();
  EXPECT_GT(after_failure, 0);
  EXPECT_EQ(threads.error(), nullptr);
}

}  // namespace
}  // namespace stoa::worker
