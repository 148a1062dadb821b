// Shared by the data-parallel trainer tests (distributed_test.cpp, fsdp_test.cpp): ranks as
// threads of this process, each with its own Gloo group over a real TCPStore; rollout and SFT
// batches; the options and comparisons their equivalence checks use.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "train/distributed.h"
#include "train/thread_ranks.h"
#include "train/trainer.h"

namespace stoa::train {

// Runs `leader` on rank 0 (it builds its Trainer with the communicator it is given) and
// Trainer::follow on ranks 1..world-1, then rethrows the first rank's error.
inline void with_ranks(int world,
                       const std::function<void(std::shared_ptr<Communicator>)>& leader) {
  RendezvousOptions o;
  o.timeout_s = 60;
  o.hash_check_every = 1;  // every step: the replicas must stay bit-identical
  run_thread_ranks(world, leader, o);
}

// Rank 0's trainer, made by `make` from the communicator, runs `steps` (the followers follow);
// returns its weights afterwards.
inline ModelWeights weights_after_ranks(
    int world, const std::function<Trainer(std::shared_ptr<Communicator>)>& make,
    const std::function<void(Trainer&)>& steps) {
  ModelWeights out;
  with_ranks(world, [&](std::shared_ptr<Communicator> ranks) {
    Trainer trainer = make(std::move(ranks));
    steps(trainer);
    out = trainer.weights();
  });
  return out;
}

// The same from `init` under `options`.
inline ModelWeights train_on_ranks(int world, const ModelWeights& init, const TrainOptions& options,
                                   const std::function<void(Trainer&)>& steps) {
  return weights_after_ranks(
      world, [&](std::shared_ptr<Communicator> ranks) { return Trainer(init, options, ranks); },
      steps);
}

// The same from the checkpoint in `dir`.
inline ModelWeights resume_on_ranks(int world, const std::string& dir, const TrainOptions& options,
                                    const std::function<void(Trainer&)>& steps) {
  return weights_after_ranks(
      world,
      [&](std::shared_ptr<Communicator> ranks) { return Trainer::resume(dir, options, ranks); },
      steps);
}

// A step's metrics on ranks against the one-process trainer's: the whole batch's, not rank 0's
// share.
inline void expect_same_metrics(const StepMetrics& ranks, const StepMetrics& one) {
  EXPECT_EQ(ranks.sequences, one.sequences);
  EXPECT_EQ(ranks.tokens, one.tokens);
  EXPECT_EQ(ranks.tokens_total, one.tokens_total);
  EXPECT_NEAR(ranks.loss, one.loss, 1e-6 * std::fabs(one.loss) + 1e-9);
  EXPECT_NEAR(ranks.grad_norm, one.grad_norm, 1e-6 * one.grad_norm);
  EXPECT_NEAR(ranks.masked_fraction, one.masked_fraction, 1e-9);
  EXPECT_NEAR(ranks.tv_max, one.tv_max, 1e-6);
}

inline std::vector<RolloutGroup> make_groups(const ModelConfig& config, uint64_t seed,
                                             int groups = 3, int per_group = 3) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(config.vocab_size) - 1);
  std::uniform_real_distribution<float> logp(-4.0f, -0.05f);
  std::vector<RolloutGroup> out;
  for (int g = 0; g < groups; ++g) {
    RolloutGroup group{"g" + std::to_string(g), {}};
    for (int i = 0; i < per_group; ++i) {
      Rollout r;
      r.id = group.id + "-r" + std::to_string(i);
      const int n = 12 + 5 * i + 2 * g;
      for (int t = 0; t < n; ++t) {
        r.tokens.push_back(tok(rng));
        r.trainable.push_back(t >= 4 && !(t >= 8 && t < 10));
        r.behaviour_logprobs.push_back(logp(rng));
      }
      r.reward = static_cast<double>((i + g) % 2);
      group.rollouts.push_back(std::move(r));
    }
    out.push_back(std::move(group));
  }
  return out;
}

inline std::vector<SftExample> make_sft(const ModelConfig& config, uint64_t seed, int count = 5) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(config.vocab_size) - 1);
  std::vector<SftExample> batch;
  for (int i = 0; i < count; ++i) {
    SftExample ex{"ex" + std::to_string(i), {}, {}};
    for (int t = 0; t < 10 + 3 * i; ++t) {
      ex.tokens.push_back(tok(rng));
      ex.mask.push_back(t >= 3);
    }
    batch.push_back(std::move(ex));
  }
  return batch;
}

inline TrainOptions options() {
  TrainOptions o;
  o.threads = 1;
  o.optimizer.lr = 1e-3;
  o.optimizer.weight_decay = 0.01;
  o.optimizer.max_grad_norm = 0.5;  // clipping active: the global norm must be the same
  o.micro_batch_tokens = 64;        // several micro-batches per rank
  o.seed = 7;
  // Adam's update g / (sqrt(v) + eps) is linear in g for |g| well below eps and sign-like above
  // it. The tiny models' random init has many gradients far below the default eps 1e-8 but not
  // below 1e-4, and there the default amplifies float-summation noise: one rank against itself
  // with another micro-batching differs by 2.2e-5 (SFT, tiny-qwen3, measured), as much as 2
  // ranks against 1 (2.0e-5). With eps 1e-4 the update reflects the gradients themselves and
  // 2 ranks match 1 to 7e-8. DefaultEps below checks the default against the noise bound.
  o.optimizer.eps = 1e-4;
  return o;
}

// ‖a − b‖ / ‖b‖ per tensor (the largest over all tensors): "parameters within 1e-6 relative".
inline double relative_difference(const ModelWeights& a, const ModelWeights& b) {
  double worst = 0.0;
  for (const auto& [name, t] : b.tensors) {
    const float* x = a.tensors.at(name).as<float>();
    const float* y = t.as<float>();
    double diff = 0.0, norm = 0.0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double d = static_cast<double>(x[i]) - y[i];
      diff += d * d;
      norm += static_cast<double>(y[i]) * y[i];
    }
    worst = std::max(worst, norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff));
  }
  return worst;
}

inline double max_abs_difference(const ModelWeights& a, const ModelWeights& b) {
  double worst = 0.0;
  for (const auto& [name, t] : b.tensors) {
    const float* x = a.tensors.at(name).as<float>();
    const float* y = t.as<float>();
    for (int64_t i = 0; i < t.numel(); ++i)
      worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]));
  }
  return worst;
}

// Both bounds, printed so that a run's log shows the measured values.
inline void expect_same_update(const ModelWeights& a, const ModelWeights& b) {
  const double relative = relative_difference(a, b), max_abs = max_abs_difference(a, b);
  std::printf("relative difference %.3g, max element difference %.3g\n", relative, max_abs);
  EXPECT_LT(relative, 1e-6);
  EXPECT_LT(max_abs, 1e-6);
}

// Another blocking of the same products (ranks, bf16 operands) may move the update by what a
// change of micro-batching may (tests/train/step_test.cpp): 5 % of one Adam step of `lr`. Prints
// the measured values after `label`.
inline void expect_within_micro_batching_noise(const char* label, const ModelWeights& a,
                                               const ModelWeights& b, double lr) {
  const double max_abs = max_abs_difference(a, b);
  std::printf("%s: relative difference %.3g, max element difference %.3g\n", label,
              relative_difference(a, b), max_abs);
  EXPECT_LT(max_abs, 0.05 * lr);
}

inline bool same_bits(const ModelWeights& a, const ModelWeights& b) {
  for (const auto& [name, t] : a.tensors) {
    const Tensor& u = b.tensors.at(name);
    if (std::memcmp(t.data(), u.data(), t.nbytes()) != 0) return false;
  }
  return true;
}

// The checkpoint tests' run: four batches of `config`'s; on two ranks, two steps, a checkpoint in
// `dir` (made fresh), then the last two, which a resumed trainer takes again.
struct CheckpointedRun {
  std::vector<std::vector<RolloutGroup>> batches;
  ModelWeights straight;  // after all four steps, never stopped
  void last_two(Trainer& trainer) const {
    trainer.train_step(batches[2]);
    trainer.train_step(batches[3]);
  }
};
inline CheckpointedRun run_with_checkpoint(const ModelConfig& config, const ModelWeights& init,
                                           const TrainOptions& options, const std::string& dir) {
  CheckpointedRun run;
  for (uint64_t s = 0; s < 4; ++s) run.batches.push_back(make_groups(config, 40 + s));
  std::filesystem::remove_all(dir);
  run.straight = train_on_ranks(2, init, options, [&](Trainer& trainer) {
    trainer.train_step(run.batches[0]);
    trainer.train_step(run.batches[1]);
    trainer.save_checkpoint(dir);
    run.last_two(trainer);
  });
  return run;
}

}  // namespace stoa::train
