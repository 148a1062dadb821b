// `stoa bench train --plan` (train_plan.h).
#include "bench/train_plan.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/machine.h"
#include "core/process.h"
#include "core/process_run.h"
#include "core/rng.h"
#include "model/presets.h"
#include "model/tensor_source.h"
#include "model/weights.h"
#include "train/memory_plan.h"
#include "train/train_bench.h"

namespace stoa::bench {
namespace {

namespace fs = std::filesystem;

double gib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}

nlohmann::json plan_json(const train::RankMemoryPlan& p) {
  return {{"frozen_base_bytes", p.frozen_base},
          {"masters_bytes", p.masters},
          {"gradients_bytes", p.gradients},
          {"moments_bytes", p.moments},
          {"gathered_bytes", p.gathered},
          {"activations_bytes", p.activations},
          {"optimizer_step_bytes", p.optimizer_step},
          {"export_copy_bytes", p.export_copy},
          {"transient_bytes", p.transient()},
          {"total_bytes", p.total()}};
}

train::MemoryPlanOptions plan_options(const TrainPlanOptions& o, int ranks,
                                      train::Sharding sharding) {
  train::MemoryPlanOptions p;
  p.sharding = sharding;
  p.ranks = ranks;
  p.sequences = o.sequences;
  p.seq_len = o.seq_len;
  p.micro_batch_tokens = o.micro_batch_tokens;
  STOA_CHECK(parse_dtype(o.dtype, &p.compute), ErrorKind::kInvalidArgument, "unknown dtype '",
             o.dtype, "' (f32, bf16)");
  p.lora.rank = o.lora_rank;
  p.lora.targets = o.lora_targets;
  STOA_CHECK(parse_dtype(o.lora_base_dtype, &p.lora.base_dtype), ErrorKind::kInvalidArgument,
             "unknown LoRA base dtype '", o.lora_base_dtype, "' (bf16, f32)");
  return p;
}

// A random model of `config` in `dir`/model (bf16 on disk: half the bytes to write and map) and
// SFT data of `steps` batches of `sequences` sequences of seq_len random tokens.
void prepare(const TrainPlanOptions& o, const ModelConfig& config, const fs::path& dir) {
  if (!fs::exists(dir / "model" / "config.json")) {
    log_info("plan", "writing a random model to ", (dir / "model").string());
    save_model_dir(RandomTensorSource(config, 1), (dir / "model").string(), DType::kBF16);
  }
  std::ofstream data(dir / "data.jsonl");
  Rng rng(7, 0);
  for (int64_t i = 0; i < o.sequences * o.steps; ++i) {
    nlohmann::json tokens = nlohmann::json::array();
    for (int64_t t = 0; t < o.seq_len; ++t)
      tokens.push_back(rng.below(static_cast<uint64_t>(config.vocab_size)));
    data << nlohmann::json{{"id", "s" + std::to_string(i)}, {"tokens", tokens}}.dump() << "\n";
  }
  STOA_CHECK(data.good(), ErrorKind::kIo, "cannot write ", (dir / "data.jsonl").string());
}

// One `stoa train --sft` run in `dir`; each rank's VmHWM growth, in rank order.
std::vector<int64_t> measure(const TrainPlanOptions& o, const fs::path& dir, int ranks,
                             const std::string& sharding) {
  const std::string name = sharding + "-" + std::to_string(ranks);
  const fs::path report = dir / ("memory-" + name);
  fs::remove_all(report);
  std::vector<std::string> argv = {self_executable(),
                                   "train",
                                   "--sft",
                                   "--model",
                                   (dir / "model").string(),
                                   "--data",
                                   (dir / "data.jsonl").string(),
                                   "--out",
                                   (dir / ("out-" + name)).string(),
                                   "--nproc",
                                   std::to_string(ranks),
                                   "--sharding",
                                   sharding,
                                   "--dtype",
                                   o.dtype,
                                   "--threads",
                                   std::to_string(o.threads),
                                   "--batch-tokens",
                                   std::to_string(o.sequences * o.seq_len),
                                   "--micro-batch-tokens",
                                   std::to_string(o.micro_batch_tokens),
                                   "--memory-report",
                                   report.string(),
                                   "--lora-rank",
                                   std::to_string(o.lora_rank),
                                   "--lora-base-dtype",
                                   o.lora_base_dtype};
  for (const std::string& target : o.lora_targets) {
    argv.push_back("--lora-targets");
    argv.push_back(target);
  }
  log_info("plan", "measuring ", sharding, " on ", ranks, " rank(s) in ", dir.string());
  run_child_or_throw(argv, (dir / ("train-" + name + ".log")).string(),
                     "stoa train (" + name + ")");
  std::vector<int64_t> growth;
  for (int r = 0; r < ranks; ++r) {
    std::ifstream in(report / ("rank-" + std::to_string(r) + ".json"));
    STOA_CHECK(in, ErrorKind::kIo, "rank ", r, " of the ", name, " run wrote no memory report");
    growth.push_back(nlohmann::json::parse(in).at("hwm_growth_bytes").get<int64_t>());
  }
  fs::remove_all(dir / ("out-" + name));
  return growth;
}

// A model preset, or a size of `stoa bench train` (qwen3-10m, lfm2_moe-100m, ...).
ModelConfig plan_config(const std::string& name) {
  const size_t dash = name.rfind('-');
  if (dash != std::string::npos &&
      (name.substr(dash + 1) == "10m" || name.substr(dash + 1) == "100m")) {
    return train::train_bench_config(name.substr(0, dash), name.substr(dash + 1));
  }
  return preset_config(name);
}

}  // namespace

int run_train_plan(const TrainPlanOptions& o) {
  const ModelConfig config = plan_config(o.preset);
  const train::Sharding sharding = train::parse_sharding(o.sharding);
  const int64_t budget = static_cast<int64_t>(o.gpu_gb * 1e9);
  nlohmann::json out = {{"preset", o.preset},
                        {"sharding", o.sharding},
                        {"dtype", o.dtype},
                        {"gpu_gb", o.gpu_gb},
                        {"sequences", o.sequences},
                        {"seq_len", o.seq_len},
                        {"micro_batch_tokens", o.micro_batch_tokens},
                        {"plans", nlohmann::json::array()}};
  if (o.lora_rank > 0) {
    const train::LoraOptions lora = plan_options(o, 1, sharding).lora;
    out["lora"] = {{"rank", o.lora_rank},
                   {"targets", o.lora_targets},
                   {"base_dtype", o.lora_base_dtype},
                   {"adapter_parameters", train::lora_adapter_numel(config, lora)}};
  }
  if (!o.json) {
    const std::string mode =
        o.lora_rank == 0 ? o.sharding
                         : cat("LoRA rank ", o.lora_rank, " (", out["lora"]["adapter_parameters"],
                               " adapter parameters), base ", o.lora_base_dtype, " frozen");
    std::printf("%s, %s, %s matmuls, %lld x %lld tokens per step, per-rank GiB:\n",
                o.preset.c_str(), mode.c_str(), o.dtype.c_str(),
                static_cast<long long>(o.sequences), static_cast<long long>(o.seq_len));
    std::printf("%6s %9s %9s %9s %9s %9s %11s %9s %9s %6s %14s\n", "ranks", "base", "masters",
                "grads", "moments", "gathered", "activations", "peak+", "total", "fits",
                "seqs/rank fit");
  }
  for (int ranks : o.ranks) {
    const train::MemoryPlanOptions po = plan_options(o, ranks, sharding);
    const train::RankMemoryPlan p = train::plan_rank_memory(config, po);
    const int64_t fit = train::sequences_that_fit(config, po, budget);
    const bool fits = p.total() <= budget;
    nlohmann::json row = plan_json(p);
    row["ranks"] = ranks;
    row["fits"] = fits;
    row["sequences_per_rank_that_fit"] = fit;
    out["plans"].push_back(row);
    if (!o.json) {
      std::printf("%6d %9.2f %9.2f %9.2f %9.2f %9.2f %11.2f %9.2f %9.2f %6s %14lld\n", ranks,
                  gib(p.frozen_base), gib(p.masters), gib(p.gradients), gib(p.moments),
                  gib(p.gathered), gib(p.activations), gib(p.transient()), gib(p.total()),
                  fits ? "yes" : "no", static_cast<long long>(fit));
    }
  }
  if (o.measure) {
    const fs::path dir(o.dir);
    fs::create_directories(dir / "runtime");
    out["load_average_1m"] = load_average_1m();
    // What a trainer process grows by beyond its training state (libtorch's code pages as they
    // are first run, the allocator's slack, Gloo's threads and buffers at N ranks): measured on
    // tiny-qwen3, whose state is ~1 MB, at each rank count the runs below use.
    const ModelConfig tiny = preset_config("tiny-qwen3");
    prepare(o, tiny, dir / "runtime");
    std::map<std::pair<std::string, int>, int64_t> runtime;
    nlohmann::json runtimes = nlohmann::json::object();
    std::vector<std::pair<std::string, int>> runs = {{"zero1", 1}};
    // LoRA trains on one process so far: its one run is the baseline.
    if (o.lora_rank == 0) {
      for (int ranks : o.ranks) runs.emplace_back(o.sharding, ranks);
    }
    for (const auto& [kind, ranks] : runs) {
      const std::vector<int64_t> growth = measure(o, dir / "runtime", ranks, kind);
      const int64_t plan =
          train::plan_rank_memory(tiny, plan_options(o, ranks, train::parse_sharding(kind)))
              .total();
      runtime[{kind, ranks}] = *std::max_element(growth.begin(), growth.end()) - plan;
      runtimes[kind + "-" + std::to_string(ranks)] = runtime[{kind, ranks}];
      if (!o.json) {
        std::printf("runtime (tiny-qwen3, %s x%d): %.0f MiB\n", kind.c_str(), ranks,
                    static_cast<double>(runtime[{kind, ranks}]) / (1 << 20));
      }
    }
    out["runtime_bytes"] = runtimes;
    prepare(o, config, dir);
    out["measured"] = nlohmann::json::array();
    // The one-process trainer first: the baseline the sharded ranks are compared with.
    int64_t baseline = 0;
    for (const auto& [kind, ranks] : runs) {
      const std::vector<int64_t> growth = measure(o, dir, ranks, kind);
      const train::RankMemoryPlan p =
          train::plan_rank_memory(config, plan_options(o, ranks, train::parse_sharding(kind)));
      const int64_t peak = *std::max_element(growth.begin(), growth.end());
      if (kind == "zero1" && ranks == 1) baseline = peak;
      const int64_t predicted = p.total() + runtime[{kind, ranks}];
      const double error = static_cast<double>(predicted - peak) / static_cast<double>(peak);
      out["measured"].push_back({{"sharding", kind},
                                 {"ranks", ranks},
                                 {"hwm_growth_bytes", growth},
                                 {"predicted_bytes", predicted},
                                 {"plan", plan_json(p)},
                                 {"prediction_error", error},
                                 {"peak_vs_one_process", static_cast<double>(peak) / baseline}});
      if (!o.json) {
        std::printf(
            "measured %-5s x%d: peak rank %.2f GiB (predicted %.2f, %+.1f%%), %.3f x the "
            "one-process peak\n",
            kind.c_str(), ranks, gib(peak), gib(predicted), 100 * error,
            static_cast<double>(peak) / baseline);
      }
    }
  }
  if (o.json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace stoa::bench
