// `stoa bench kernels`: throughput of the int8 matmul kernels (W8A8 and W8A32) at batch 1/8/32
// on typical projection shapes, with 1 and 2 threads, beside this machine's memory bandwidth.
//
// Weights are cycled through enough copies (>= 256 MiB in all) that every call streams them from
// DRAM, as a decode step over a whole model does; a single small matrix would sit in L2 and
// flatter the kernel (--hot measures exactly that: the compute ceiling). GB/s counts weight bytes
// (int8 values + f16 scales) per second; GFLOP/s counts 2 * rows * cols * batch.
#include "bench/kernels_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/machine.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "kernels/matmul_int8.h"
#include "kernels/targets.h"

namespace stoa::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kColdBytes = size_t{256} << 20;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU seconds (all threads of this process) per call of the last time_per_call: on a machine
// shared with other work, wall time also counts the time the scheduler gave to others.
thread_local double g_cpu_per_call = 0;

// Runs fn() repeatedly for at least min_seconds (after one warm-up call); wall seconds per call.
template <typename Fn>
double time_per_call(double min_seconds, Fn&& fn) {
  fn();
  int64_t calls = 0;
  const auto start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = seconds_since(start);
  } while (elapsed < min_seconds);
  g_cpu_per_call = (process_cpu_seconds() - cpu_start) / static_cast<double>(calls);
  return elapsed / static_cast<double>(calls);
}

// memcpy of a buffer far larger than the caches, split over the pool: bytes copied per second
// (DRAM traffic is twice that: read + write).
double memcpy_gbps(ThreadPool& pool, double min_seconds) {
  std::vector<char> src(kColdBytes, 1), dst(kColdBytes, 0);
  const double t = time_per_call(min_seconds, [&] {
    pool.parallel_for(static_cast<int64_t>(kColdBytes), 4096, [&](int64_t begin, int64_t end) {
      std::memcpy(dst.data() + begin, src.data() + begin, static_cast<size_t>(end - begin));
    });
  });
  return static_cast<double>(kColdBytes) / t / 1e9;
}

// Read-only streaming (what a weight pass is): sums 64-bit words of a cold buffer.
double read_gbps(ThreadPool& pool, double min_seconds) {
  std::vector<uint64_t> buf(kColdBytes / 8, 3);
  std::atomic<uint64_t> total{0};
  const double t = time_per_call(min_seconds, [&] {
    pool.parallel_for(static_cast<int64_t>(buf.size()), 1024, [&](int64_t begin, int64_t end) {
      uint64_t a = 0, b = 0, c = 0, d = 0;
      int64_t i = begin;
      for (; i + 4 <= end; i += 4) {
        a += buf[i];
        b += buf[i + 1];
        c += buf[i + 2];
        d += buf[i + 3];
      }
      for (; i < end; ++i) a += buf[i];
      total.fetch_add(a + b + c + d, std::memory_order_relaxed);  // keeps the reads observable
    });
  });
  if (total.load() == 42) std::fprintf(stderr, " ");
  return static_cast<double>(kColdBytes) / t / 1e9;
}

struct Shape {
  int64_t rows, cols;
  const char* what;
};

// Copies of one random weight matrix, enough of them to exceed the caches.
struct ColdWeights {
  std::vector<std::vector<int8_t>> values;
  std::vector<std::vector<uint16_t>> scales;
  int64_t rows = 0, cols = 0;

  ColdWeights(int64_t r, int64_t c, bool hot) : rows(r), cols(c) {
    const size_t bytes = static_cast<size_t>(r * c + r * c / 16);
    const size_t copies = hot ? 1 : std::max<size_t>(2, kColdBytes / bytes + 1);
    Rng rng(7, 0);
    std::vector<int8_t> v(static_cast<size_t>(r * c));
    for (auto& x : v) x = static_cast<int8_t>(rng.range(-127, 127));
    std::vector<uint16_t> s(static_cast<size_t>(r * c / 32));
    for (auto& x : s) x = static_cast<uint16_t>(0x2000 + rng.below(0x400));  // ~1e-3 magnitudes
    values.assign(copies, v);
    scales.assign(copies, s);
  }
  size_t copies() const { return values.size(); }
  kernels::Int8Weights view(size_t i) const {
    return {values[i].data(), scales[i].data(), rows, cols};
  }
  double bytes() const { return static_cast<double>(rows * cols + rows * cols / 16); }
};

}  // namespace

int run_kernels_bench(const KernelsBenchOptions& opts) {
  std::vector<Shape> shapes = {{1024, 1024, "attention projection"},
                               {4096, 1024, "MLP up/gate"},
                               {1024, 4096, "MLP down"},
                               {32000, 1024, "vocabulary head"}};
  if (opts.quick) shapes.resize(1);
  for (int b : opts.batches)
    STOA_CHECK(b > 0 && b <= 1024, ErrorKind::kInvalidArgument, "--batch ", b,
               " is not in 1..1024");
  for (int t : opts.threads)
    STOA_CHECK(t > 0 && t <= 256, ErrorKind::kInvalidArgument, "--threads ", t,
               " is not in 1..256");

  std::vector<int64_t> targets = {kernels::active_target()};
  if (opts.all_targets) {
    targets = kernels::available_targets();
    targets.erase(std::remove_if(targets.begin(), targets.end(),
                                 [](int64_t t) { return kernels::target_name(t) == "SCALAR"; }),
                  targets.end());
  }
  const int max_batch = *std::max_element(opts.batches.begin(), opts.batches.end());

  nlohmann::json out;
  out["cpu"] = cpu_model_name();
  out["best_target"] = kernels::target_name(kernels::active_target());
  out["cache"] = opts.hot ? "hot" : "cold";
  out["memory"] = nlohmann::json::object();
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int t : opts.threads) {
    pools.push_back(std::make_unique<ThreadPool>(t));
    out["memory"]["memcpy_gbps"][std::to_string(t)] = memcpy_gbps(*pools.back(), opts.min_seconds);
    out["memory"]["read_gbps"][std::to_string(t)] = read_gbps(*pools.back(), opts.min_seconds);
    if (!opts.json)
      std::printf("memory, %d thread(s): memcpy %.1f GB/s, read %.1f GB/s\n", t,
                  out["memory"]["memcpy_gbps"][std::to_string(t)].get<double>(),
                  out["memory"]["read_gbps"][std::to_string(t)].get<double>());
  }

  nlohmann::json results = nlohmann::json::array();
  for (const Shape& shape : shapes) {
    ColdWeights weights(shape.rows, shape.cols, opts.hot);
    NormalRng normal(3, 0);
    std::vector<float> x(static_cast<size_t>(max_batch * shape.cols));
    for (auto& v : x) v = normal.next_float();
    std::vector<float> y(static_cast<size_t>(max_batch * shape.rows));
    std::vector<int8_t> xq(x.size());
    std::vector<float> xd(x.size() / 32);
    for (int64_t target : targets) {
      kernels::force_target(opts.all_targets ? target : 0);
      for (size_t ti = 0; ti < opts.threads.size(); ++ti) {
        ThreadPool& pool = *pools[ti];
        for (int batch : opts.batches) {
          for (const char* variant : {"w8a8", "w8a32"}) {
            const bool a8 = std::strcmp(variant, "w8a8") == 0;
            size_t copy = 0;
            const double t = time_per_call(opts.min_seconds, [&] {
              const kernels::Int8Weights w = weights.view(copy);
              copy = (copy + 1) % weights.copies();
              kernels::Q8Activations acts{xq.data(), xd.data(), batch, shape.cols};
              if (a8) kernels::quantize_activations_q8(x.data(), shape.cols, acts);
              pool.parallel_for(shape.rows, 16, [&](int64_t begin, int64_t end) {
                if (a8) {
                  kernels::matmul_w8a8(w, acts, y.data(), shape.rows, begin, end);
                } else {
                  kernels::matmul_w8a32(w, x.data(), shape.cols, batch, y.data(), shape.rows, begin,
                                        end);
                }
              });
            });
            const double gbps = weights.bytes() / t / 1e9;
            const double gflops =
                2.0 * static_cast<double>(shape.rows * shape.cols) * batch / t / 1e9;
            results.push_back({{"target", kernels::target_name(kernels::active_target())},
                               {"variant", variant},
                               {"rows", shape.rows},
                               {"cols", shape.cols},
                               {"shape", shape.what},
                               {"batch", batch},
                               {"threads", opts.threads[ti]},
                               {"us_per_call", t * 1e6},
                               {"cpu_us_per_call", g_cpu_per_call * 1e6},
                               {"weight_gbps", gbps},
                               {"gflops", gflops}});
            if (!opts.json)
              std::printf(
                  "%-8s %-6s %5lldx%-5lld b=%-3d t=%d  %9.1f us (cpu %9.1f us)  %6.2f GB/s  %7.2f "
                  "GFLOP/s\n",
                  kernels::target_name(kernels::active_target()).c_str(), variant,
                  static_cast<long long>(shape.rows), static_cast<long long>(shape.cols), batch,
                  opts.threads[ti], t * 1e6, g_cpu_per_call * 1e6, gbps, gflops);
          }
        }
      }
    }
    kernels::force_target(0);
  }
  out["results"] = results;
  if (opts.json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace stoa::bench
