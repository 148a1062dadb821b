// `stoa bench train --plan`: the trainer's per-rank memory plan (train/memory_plan.h) for a
// preset, a number of ranks and a GPU size — and with --measure, the plan checked against the CPU
// trainer: `stoa train --sft` at each rank count on a random model of the preset, each rank's
// peak resident set (VmHWM growth) beside its prediction.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stoa::bench {

struct TrainPlanOptions {
  std::string preset = "lfm2-8b-a1b";
  std::vector<int> ranks = {1, 2, 4, 8};
  double gpu_gb = 80;  // per GPU, GB (1e9 bytes)
  std::string sharding = "fsdp";
  std::string dtype = "bf16";  // the matmuls' dtype
  int64_t sequences = 8;       // per optimiser step, all ranks
  int64_t seq_len = 1024;
  int64_t micro_batch_tokens = 8192;
  // --lora: adapters on a frozen base (train/lora.h); rank 0 plans full fine-tuning.
  int64_t lora_rank = 0;
  std::vector<std::string> lora_targets = {"all-linear"};
  std::string lora_base_dtype = "bf16";
  // --measure: run the CPU trainer here (in `dir`) and compare.
  bool measure = false;
  std::string dir = "stoa-train-plan";
  int threads = 1;  // libtorch threads per rank
  int steps = 2;    // optimiser steps per run (the moments exist from the first)
  bool json = false;
};

int run_train_plan(const TrainPlanOptions& options);

}  // namespace stoa::bench
