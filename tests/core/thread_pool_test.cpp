#include <gtest/gtest.h>

#include <atomic>
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
