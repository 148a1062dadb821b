// INTERNAL (includes libtorch). The policy losses (reference.md §1), their trust-region masks,
// the divergences between π and μ, the token scoring shared by RL and SFT, and the step metrics.
//
// Every variant is ℓ_t = −A_t · sg(min(p_t/μ_t, C)) · M_t · log p_t (on-policy PG: −A_t·log p_t);
// a variant is one row of the table in losses.cpp: its mask rule and whether it uses the ratio.
#pragma once
#include <torch/torch.h>

#include "train/loss_config.h"
#include "train/trainer.h"

namespace stoa::train {

// Flattened over the batch's trainable tokens (N of them).
struct LossInputs {
  torch::Tensor logp;          // [N] log π of the sampled token (differentiable)
  torch::Tensor mu_logp;       // [N] behaviour log μ
  torch::Tensor advantage;     // [N]
  torch::Tensor weight;        // [N] aggregation weight: 1 / (the batch's loss denominator)
  torch::Tensor topk_logp;     // [N, K] log π at the worker's top-K ids (differentiable), optional
  torch::Tensor topk_mu_logp;  // [N, K] the worker's top-K log μ, optional
};

struct LossTerms {
  torch::Tensor loss;   // scalar Σ weight · ℓ
  torch::Tensor keep;   // [N] M_t as 0/1 float (detached)
  torch::Tensor ratio;  // [N] p/μ, untruncated (detached)
  torch::Tensor tv;     // [N] TV(π, μ): top-K when given, else binary (detached)
  torch::Tensor kl;     // [N] KL(μ‖π): top-K when given, else binary (detached)
};

// The divergences per token (detached, f64-safe in any float dtype).
torch::Tensor binary_tv(const torch::Tensor& logp, const torch::Tensor& mu_logp);
torch::Tensor binary_kl(const torch::Tensor& logp, const torch::Tensor& mu_logp, double eps);
torch::Tensor topk_tv(const torch::Tensor& topk_logp, const torch::Tensor& topk_mu_logp);
torch::Tensor topk_kl(const torch::Tensor& topk_logp, const torch::Tensor& topk_mu_logp);

LossTerms policy_loss(const LossConfig& config, const LossInputs& inputs);

// Log-probs from logits [N, V]: of `targets` [N], at `topk_ids` [N, K] (optional), and the
// entropy of each row (detached).
struct ScoredTokens {
  torch::Tensor logp;
  torch::Tensor topk_logp;
  torch::Tensor entropy;
};
ScoredTokens score_tokens(const torch::Tensor& logits, const torch::Tensor& targets,
                          const torch::Tensor& topk_ids);

// Running sums over the micro-batches of one step, turned into StepMetrics at the end.
class MetricSums {
 public:
  void add(const LossInputs& inputs, const LossTerms& terms, const torch::Tensor& entropy);
  void add_sft(const torch::Tensor& logp, const torch::Tensor& entropy);
  void finish(StepMetrics* metrics) const;
  // The data-parallel trainer adds the ranks' sums and takes the largest of their maxima.
  std::vector<double*> sum_fields() {
    return {&n_,        &masked_,  &pos_,         &pos_masked_, &neg_,    &neg_masked_,
            &tv_sum_,   &kl_sum_,  &chi2_sum_,    &p_sum_,      &mu_sum_, &pp_sum_,
            &mumu_sum_, &pmu_sum_, &log_ppl_sum_, &entropy_sum_};
  }
  std::vector<double*> max_fields() { return {&tv_max_, &kl_max_}; }

 private:
  double n_ = 0, masked_ = 0, pos_ = 0, pos_masked_ = 0, neg_ = 0, neg_masked_ = 0;
  double tv_sum_ = 0, tv_max_ = 0, kl_sum_ = 0, kl_max_ = 0, chi2_sum_ = 0;
  double p_sum_ = 0, mu_sum_ = 0, pp_sum_ = 0, mumu_sum_ = 0, pmu_sum_ = 0;
  double log_ppl_sum_ = 0, entropy_sum_ = 0;
};

}  // namespace stoa::train
