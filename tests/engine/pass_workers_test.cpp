// The pass-scoped spinning workers (engine/pass_workers.h) and the one-dispatch linear groups
// (Linear::forward_group / forward_jobs) built on them.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/int8_grid.h"
#include "core/rng.h"
#include "engine/linear.h"
#include "engine/pass_workers.h"
#include "engine/sampler.h"

namespace stoa::engine {
namespace {

TEST(PassWorkers, EveryIndexOnceAcrossManyOperations) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    std::vector<int> hits(1000, 0);
    int ops = 0;
    run_pass(pool, [&] {
      EXPECT_EQ(current_pass(pool) != nullptr, threads > 1);
      // Many small operations back to back, with serial work between them (the decode shape).
      for (int op = 0; op < 500; ++op) {
        const int64_t n = 1 + op % 97;
        parallel_for(pool, n, op % 3 == 0 ? 16 : 1, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
        });
        ++ops;
      }
    });
    EXPECT_EQ(current_pass(pool), nullptr);
    std::vector<int> want(1000, 0);
    for (int op = 0; op < 500; ++op)
      for (int64_t i = 0; i < 1 + op % 97; ++i) ++want[static_cast<size_t>(i)];
    EXPECT_EQ(hits, want) << threads << " threads";
    EXPECT_EQ(ops, 500);
  }
}

TEST(PassWorkers, TaskOnThreadLikeThreadPool) {
  // Task t runs on thread t % size(), as ThreadPool::run promises, inside a pass too.
  ThreadPool pool(3);
  std::vector<std::thread::id> ids(9);
  run_pass(pool, [&] {
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<std::thread::id> now(9);
      parallel_run(pool, 9,
                   [&](int task) { now[static_cast<size_t>(task)] = std::this_thread::get_id(); });
      for (int t = 0; t < 9; ++t)
        EXPECT_EQ(now[static_cast<size_t>(t)], now[static_cast<size_t>(t % 3)]);
      if (rep == 0) ids = now;
      EXPECT_EQ(now, ids);
    }
    EXPECT_EQ(ids[0], std::this_thread::get_id());
  });
}

TEST(PassWorkers, SleepingWorkersWakeUp) {
  // A serial stretch far longer than any spin budget: the workers fall asleep on the futex and
  // the next operation must still wake them.
  ThreadPool pool(2);
  std::atomic<int> on_worker{0};
  run_pass(pool, [&] {
    for (int rep = 0; rep < 3; ++rep) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      parallel_run(pool, 2, [&](int task) {
        if (task == 1) on_worker.fetch_add(1);
      });
    }
  });
  EXPECT_EQ(on_worker.load(), 3);
}

TEST(PassWorkers, ExceptionsPropagateAndNestedPassesRunInline) {
  ThreadPool pool(2);
  EXPECT_THROW(run_pass(pool, [] { throw std::runtime_error("boom"); }), std::runtime_error);
  // The nested pass runs inline, but its parallel_for still hands one of its two chunks to the
  // pool's other thread: the count is atomic.
  std::atomic<int> inner{0};
  run_pass(pool, [&] {
    run_pass(pool,
             [&] { parallel_for(pool, 10, 1, [&](int64_t, int64_t) { inner.fetch_add(1); }); });
  });
  EXPECT_EQ(inner.load(), 2);
  // The pool is usable after both.
  std::atomic<int> after{0};
  pool.run(2, [&](int) { after.fetch_add(1); });
  EXPECT_EQ(after.load(), 2);
}

Linear random_int8(int64_t rows, int64_t cols, uint64_t seed) {
  Rng rng(seed, kSamplerStreamBase + 1);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (auto& v : w) v = static_cast<float>(rng.uniform() - 0.5);
  return Linear::from_int8(int8_quantize(w.data(), rows, cols));
}

TEST(LinearJobs, GroupAndJobsEqualSeparateForwards) {
  const int64_t cols = 96;
  std::vector<Linear> linears;
  linears.push_back(random_int8(48, cols, 1));
  linears.push_back(random_int8(16, cols, 2));
  linears.push_back(random_int8(33, cols, 3));  // not a whole row tile
  Rng rng(4, kSamplerStreamBase + 4);
  std::vector<float> x1(static_cast<size_t>(5 * cols)), x2(static_cast<size_t>(3 * cols));
  for (auto& v : x1) v = static_cast<float>(rng.uniform() - 0.5);
  for (auto& v : x2) v = static_cast<float>(rng.uniform() - 0.5);
  for (Backend backend : {Backend::kW8A8, Backend::kW8A32, Backend::kReference}) {
    for (Linear& l : linears) l.set_backend(backend);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      // Separate forwards, outside any pass.
      std::vector<std::vector<float>> want;
      want.emplace_back(5 * 48);
      want.emplace_back(5 * 16);
      want.emplace_back(3 * 33);
      linears[0].forward(x1.data(), 5, want[0].data(), pool);
      linears[1].forward(x1.data(), 5, want[1].data(), pool);
      linears[2].forward(x2.data(), 3, want[2].data(), pool);
      // A group sharing x1, and jobs with their own inputs (one with no tokens), in a pass.
      std::vector<float> g0(want[0].size()), g1(want[1].size()), j0(want[0].size()),
          j2(want[2].size()), unused(4, 7.0f);
      run_pass(pool, [&] {
        const Linear* group[2] = {&linears[0], &linears[1]};
        float* ys[2] = {g0.data(), g1.data()};
        Linear::forward_group(group, x1.data(), 5, ys, pool);
        const LinearJob jobs[3] = {{&linears[0], x1.data(), 5, j0.data()},
                                   {&linears[1], x2.data(), 0, unused.data()},
                                   {&linears[2], x2.data(), 3, j2.data()}};
        Linear::forward_jobs(jobs, pool);
      });
      const std::string where =
          std::string(backend_name(backend)) + ", " + std::to_string(threads) + " threads";
      auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
      };
      EXPECT_TRUE(same(g0, want[0])) << where;
      EXPECT_TRUE(same(g1, want[1])) << where;
      EXPECT_TRUE(same(j0, want[0])) << where;
      EXPECT_TRUE(same(j2, want[2])) << where;
      EXPECT_EQ(unused, std::vector<float>(4, 7.0f)) << where;
    }
  }
}

}  // namespace
}  // namespace stoa::engine
