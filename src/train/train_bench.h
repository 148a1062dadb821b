// `stoa bench train` (torch-free interface): tokens/s of full DPPO training steps (forward,
// backward, AdamW) on ~10M- and ~100M-parameter models of each architecture, and the model FLOP
// utilisation against this machine's measured matmul peak (torch::mm in the same run).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace stoa::train {

struct TrainBenchOptions {
  std::vector<std::string> archs = {"qwen3", "lfm2", "lfm2_moe"};
  std::vector<std::string> sizes = {"10m", "100m"};
  int64_t seq_len = 512;
  int64_t batch = 1;           // rollouts per step (one group)
  int64_t prompt_tokens = 64;  // untrained prefix of each rollout
  int steps = 2;               // timed steps (after `warmup` untimed ones)
  int warmup = 1;
  // 0: libtorch's default (one per core). On a machine shared with other busy processes use 1:
  // libtorch's OpenMP barriers spin, and 2 threads on 2 oversubscribed cores measured 17x slower.
  int threads = 0;
  std::string device = "cpu";
  DType compute_dtype = DType::kF32;
  int64_t sgemm_size = 2048;  // square matmul for the peak measurement
  // > 1: also run the same steps data parallel on `nproc` Gloo ranks (threads of this process,
  // each with `threads` intra-op threads; batch ≥ nproc so every rank has rollouts) and report
  // the scaling efficiency against the one-rank run.
  int nproc = 1;
};

struct TrainBenchResult {
  std::string arch, size;
  int64_t params = 0, active_params = 0;
  int64_t seq_len = 0, batch = 0;
  double step_seconds = 0.0;  // mean over the timed steps
  double tokens_per_second = 0.0;
  double model_gflops = 0.0;  // useful FLOPs per step / step time (6N + attention)
  double mfu = 0.0;           // model_gflops / sgemm_gflops
  // With nproc > 1: the data-parallel run of the same steps.
  int nproc = 1;
  double tokens_per_second_ranks = 0.0;
  double scaling_efficiency = 0.0;  // tokens_per_second_ranks / (nproc · tokens_per_second)
  double all_reduce_seconds_per_step = 0.0;  // rank 0's gradient all-reduce
  double broadcast_seconds_per_step = 0.0;   // batch + parameter shards
};

struct TrainBenchReport {
  std::string device, compute_dtype;
  int threads = 0;
  double sgemm_gflops = 0.0;
  std::vector<TrainBenchResult> results;
};

// The bench model shapes: "10m" / "100m" for "qwen3", "lfm2", "lfm2_moe".
ModelConfig train_bench_config(const std::string& arch, const std::string& size);
// Measured peak of a square f32 (or compute-dtype) matmul on the device, GFLOP/s.
double measure_matmul_gflops(const std::string& device, DType dtype, int64_t n, int threads);
TrainBenchReport run_train_bench(const TrainBenchOptions& options);
std::string train_bench_json(const TrainBenchReport& report);  // pretty-printed JSON

}  // namespace stoa::train
