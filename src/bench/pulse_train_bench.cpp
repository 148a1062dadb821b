// `stoa bench pulse`: PULSE on REAL AdamW updates. A ~100M-parameter model of a supported
// architecture (random init at realistic scale, N(0, 0.02)) is trained with the trainer's DPPO
// loss on synthetic on-policy rollouts at each learning rate; after 1, 4 and 16 steps the f32
// master weights go to pulse::PulseBench, which measures the int8 patch against what other
// systems send (zstd of the full int8 state, zstd of XOR(old, new), a bf16 PULSE patch), encode
// and apply throughput, and bit-exactness. Every lr starts again from the same base weights.
#include "bench/pulse_train_bench.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/pulse_bench.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "model/arch_registry.h"
#include "model/weights.h"
#include "train/train_bench.h"
#include "train/trainer.h"

namespace stoa::bench {
namespace {

pulse::WeightViews views_of(const ModelWeights& w) {
  pulse::WeightViews v;
  for (const auto& [name, t] : w.tensors) v.emplace(name, t.view());
  return v;
}

// One group of rollouts with random tokens; the behaviour log-probs are the policy's own
// (on-policy, so the trust region masks nothing) and the rewards alternate 0/1, so every
// rollout carries a non-zero advantage and the step is a full-strength AdamW update.
std::vector<train::RolloutGroup> make_batch(const train::Trainer& trainer,
                                            const PulseTrainBenchOptions& o, Rng& rng) {
  const auto vocab = static_cast<uint64_t>(trainer.config().vocab_size);
  train::RolloutGroup g{"pulse-bench", {}};
  for (int64_t b = 0; b < o.batch; ++b) {
    train::Rollout r;
    r.id = cat("pulse-bench-", b);
    r.reward = static_cast<double>(b % 2);
    for (int64_t i = 0; i < o.seq_len; ++i) {
      r.tokens.push_back(static_cast<int32_t>(rng.below(vocab)));
      r.trainable.push_back(i >= o.prompt_tokens);
    }
    std::vector<float> lp = trainer.token_logprobs(r.tokens);
    r.behaviour_logprobs.resize(lp.size());
    for (size_t i = 0; i < lp.size(); ++i)
      r.behaviour_logprobs[i] = r.trainable[i] ? std::min(lp[i], 0.0f) : 0.0f;
    g.rollouts.push_back(std::move(r));
  }
  return {std::move(g)};
}

pulse::PositionCoding parse_coding(const std::string& name) {
  for (auto c : {pulse::PositionCoding::kVarint, pulse::PositionCoding::kFixed,
                 pulse::PositionCoding::kShuffled, pulse::PositionCoding::kRowCol})
    if (name == pulse::position_coding_name(c)) return c;
  fail(ErrorKind::kInvalidArgument, "unknown position coding '", name,
       "' (varint, fixed, shuffled, rowcol)");
}

}  // namespace

int run_pulse_train_bench(const PulseTrainBenchOptions& o) {
  STOA_CHECK(!o.lrs.empty() && !o.steps.empty(), ErrorKind::kInvalidArgument,
             "bench pulse needs at least one --lrs and one --steps value");
  for (int s : o.steps)
    STOA_CHECK(s >= 1, ErrorKind::kInvalidArgument, "bench pulse: --steps must be >= 1, got ", s);
  STOA_CHECK(o.seq_len > o.prompt_tokens && o.prompt_tokens >= 1 && o.batch >= 2,
             ErrorKind::kInvalidArgument,
             "bench pulse needs --seq-len > --prompt-tokens >= 1 and --batch >= 2");
  ModelConfig config = train::train_bench_config(o.arch, o.size);
  ModelWeights base = random_weights(config, o.seed);
  log_info("bench", "pulse: ", o.arch, "-", o.size, ", ", count_parameters(config), " parameters");
  pulse::PulseBenchOptions bo;
  bo.coding = parse_coding(o.coding);
  bo.measure_codings = o.codings;
  pulse::PulseBench bench(views_of(base), bo);
  const int max_steps = *std::max_element(o.steps.begin(), o.steps.end());
  ModelWeights current;
  for (double lr : o.lrs) {
    train::TrainOptions t;
    t.device = o.device;
    t.threads = o.threads;
    t.optimizer.lr = lr;
    t.optimizer.weight_decay = o.weight_decay;
    t.micro_batch_tokens = o.seq_len * o.batch;
    train::Trainer trainer(base, t);
    Rng rng(o.seed + 17, 0);
    for (int step = 1; step <= max_steps; ++step) {
      trainer.train_step(make_batch(trainer, o, rng));
      if (std::find(o.steps.begin(), o.steps.end(), step) == o.steps.end()) continue;
      trainer.copy_weights_to(&current);
      const pulse::PulseBenchRun& r = bench.measure(lr, step, views_of(current));
      log_info("bench", "pulse lr ", lr, " steps ", step, ": changed ", r.changed_fraction,
               ", patch ", r.patch_bytes, " B (full int8 ", r.full_int8_bytes, ", xor+zstd ",
               r.xor_zstd_bytes, ", full zstd ", r.full_zstd_bytes, ", bf16 patch ",
               r.bf16_patch_bytes, "), encode ", r.encode_mbps, " MB/s, apply ", r.apply_mbps,
               " MB/s, bitexact ", r.bitexact);
    }
  }
  if (o.json) {
    std::printf("%s\n", bench.to_json().dump(2).c_str());
    return 0;
  }
  std::printf("%-7s %5s %9s %11s %11s %11s %11s %11s %11s %8s %8s %s\n", "lr", "steps", "changed",
              "patch", "full_int8", "full_bf16", "xor_zstd", "full_zstd", "bf16_patch", "enc MB/s",
              "app MB/s", "bitexact");
  for (const auto& r : bench.runs()) {
    std::printf("%-7g %5d %8.4f%% %11llu %11llu %11llu %11llu %11llu %11llu %8.0f %8.0f %s\n", r.lr,
                r.steps, 100.0 * r.changed_fraction, static_cast<unsigned long long>(r.patch_bytes),
                static_cast<unsigned long long>(r.full_int8_bytes),
                static_cast<unsigned long long>(r.full_bf16_bytes),
                static_cast<unsigned long long>(r.xor_zstd_bytes),
                static_cast<unsigned long long>(r.full_zstd_bytes),
                static_cast<unsigned long long>(r.bf16_patch_bytes), r.encode_mbps, r.apply_mbps,
                r.bitexact ? "true" : "false");
    for (const auto& [name, bytes] : r.coding_bytes)
      std::printf("        %s coding: %llu bytes\n", name.c_str(),
                  static_cast<unsigned long long>(bytes));
  }
  bool all_exact = std::all_of(bench.runs().begin(), bench.runs().end(),
                               [](const pulse::PulseBenchRun& r) { return r.bitexact; });
  return all_exact ? 0 : 1;
}

}  // namespace stoa::bench
