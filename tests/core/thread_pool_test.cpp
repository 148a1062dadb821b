#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace stoa {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int round = 0; round < 200; ++round) {
      std::vector<std::atomic<int>> hits(37);
      pool.run(37, [&](int task) { hits[task].fetch_add(1); });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
}

// With spinning on, workers and the caller spin between runs before sleeping: back-to-back runs,
// runs after the spin budget has run out (everyone asleep again), and destroying a pool whose
// workers are spinning all behave as without it.
TEST(ThreadPool, SpinningBetweenRunsLosesNoTask) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    pool.set_spin_ns(200'000);
    for (int round = 0; round < 300; ++round) {
      std::vector<std::atomic<int>> hits(11);
      pool.run(11, [&](int task) { hits[task].fetch_add(1); });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
      if (round % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    pool.set_spin_ns(0);
    std::atomic<int> n{0};
    pool.run(threads, [&](int) { n.fetch_add(1); });
    EXPECT_EQ(n.load(), threads);
    pool.set_spin_ns(50'000'000);  // destroyed while its workers spin
    pool.run(threads, [&](int) { n.fetch_add(1); });
  }
}

TEST(ThreadPool, ParallelForCoversTheRangeWithAlignedChunks) {
  ThreadPool pool(3);
  std::vector<int> seen(1000, 0);
  pool.parallel_for(1000, 32, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b % 32, 0);
    for (int64_t i = b; i < e; ++i) seen[i]++;
  });
  for (int v : seen) EXPECT_EQ(v, 1);
}

}  // namespace
}  // namespace stoa
