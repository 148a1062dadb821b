#include "train/losses.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace stoa::train {
namespace {

// What a mask rule sees for each token (all detached).
struct TokenStats {
  torch::Tensor p, mu, ratio;      // probabilities and p/μ
  torch::Tensor tv, kl;            // binary divergences
  torch::Tensor topk_tv, topk_kl;  // undefined without a top-K report
};

using DropRule = torch::Tensor (*)(const LossConfig&, const TokenStats&, const torch::Tensor& pos);

// The mask rules. `pos` is A > 0; a token is dropped only when it left the trust region in the
// direction its advantage pushes it (reference.md §1 table).
torch::Tensor drop_binary_tv(const LossConfig& c, const TokenStats& s, const torch::Tensor& pos) {
  torch::Tensor diff = s.p - s.mu;
  return torch::where(pos, diff > c.delta_hi, diff < -c.delta_lo);
}
torch::Tensor drop_by_divergence(const LossConfig& c, const torch::Tensor& d, const TokenStats& s,
                                 const torch::Tensor& pos) {
  return torch::where(pos, (d > c.delta_hi).logical_and(s.p > s.mu),
                      (d > c.delta_lo).logical_and(s.p < s.mu));
}
torch::Tensor drop_binary_kl(const LossConfig& c, const TokenStats& s, const torch::Tensor& pos) {
  return drop_by_divergence(c, s.kl, s, pos);
}
torch::Tensor drop_topk_tv(const LossConfig& c, const TokenStats& s, const torch::Tensor& pos) {
  return drop_by_divergence(c, s.topk_tv, s, pos);
}
torch::Tensor drop_topk_kl(const LossConfig& c, const TokenStats& s, const torch::Tensor& pos) {
  return drop_by_divergence(c, s.topk_kl, s, pos);
}
torch::Tensor drop_ppo_clip(const LossConfig& c, const TokenStats& s, const torch::Tensor& pos) {
  return torch::where(pos, s.ratio > 1.0 + c.clip_eps_hi, s.ratio < 1.0 - c.clip_eps_lo);
}

struct Variant {
  LossKind kind;
  DropRule drop;   // nullptr: no mask
  bool use_ratio;  // false: plain −A·log p
};

// Adding a variant: a LossKind value, its name (train_options.cpp) and one row here.
constexpr Variant kVariants[] = {
    {LossKind::kDppoBinaryTv, drop_binary_tv, true},
    {LossKind::kDppoBinaryKl, drop_binary_kl, true},
    {LossKind::kDppoTopkTv, drop_topk_tv, true},
    {LossKind::kDppoTopkKl, drop_topk_kl, true},
    {LossKind::kPpoClip, drop_ppo_clip, true},
    {LossKind::kTruncatedIs, nullptr, true},
    {LossKind::kOnPolicyPg, nullptr, false},
};

const Variant& variant(LossKind kind) {
  for (const Variant& v : kVariants) {
    if (v.kind == kind) return v;
  }
  fail(ErrorKind::kInternal, "loss ", loss_kind_name(kind), " has no entry in the variant table");
}

double total(const torch::Tensor& t) {
  return t.sum().to(torch::kFloat64).item<double>();
}
double max_or_zero(const torch::Tensor& t) {
  return t.numel() == 0 ? 0.0 : t.max().to(torch::kFloat64).item<double>();
}

}  // namespace

torch::Tensor binary_tv(const torch::Tensor& logp, const torch::Tensor& mu_logp) {
  return (logp.detach().exp() - mu_logp.exp()).abs();
}

torch::Tensor binary_kl(const torch::Tensor& logp, const torch::Tensor& mu_logp, double eps) {
  torch::Tensor p = logp.detach().exp(), mu = mu_logp.exp();
  return mu * ((mu + eps).log() - (p + eps).log()) +
         (1 - mu) * ((1 - mu + eps).log() - (1 - p + eps).log());
}

torch::Tensor topk_tv(const torch::Tensor& topk_logp, const torch::Tensor& topk_mu_logp) {
  torch::Tensor pi = topk_logp.detach().exp(), mu = topk_mu_logp.exp();
  torch::Tensor pi_rest = (1 - pi.sum(-1)).clamp_min(1e-12);
  torch::Tensor mu_rest = (1 - mu.sum(-1)).clamp_min(1e-12);
  return 0.5 * ((mu - pi).abs().sum(-1) + (mu_rest - pi_rest).abs());
}

torch::Tensor topk_kl(const torch::Tensor& topk_logp, const torch::Tensor& topk_mu_logp) {
  torch::Tensor lpi = topk_logp.detach();
  torch::Tensor mu = topk_mu_logp.exp();
  torch::Tensor pi_rest = (1 - lpi.exp().sum(-1)).clamp_min(1e-12);
  torch::Tensor mu_rest = (1 - mu.sum(-1)).clamp_min(1e-12);
  return (mu * (topk_mu_logp - lpi)).sum(-1) + mu_rest * (mu_rest.log() - pi_rest.log());
}

LossTerms policy_loss(const LossConfig& config, const LossInputs& in) {
  const Variant& v = variant(config.kind);
  const bool has_topk = in.topk_logp.defined() && in.topk_mu_logp.defined();
  STOA_CHECK(!loss_needs_topk(config.kind) || has_topk, ErrorKind::kInvalidArgument, "the ",
             loss_kind_name(config.kind), " loss needs top-K log-probs from the workers");
  LossTerms terms;
  TokenStats s;
  torch::Tensor lp = in.logp.detach();
  s.p = lp.exp();
  s.mu = in.mu_logp.exp();
  s.ratio = (lp - in.mu_logp).exp();
  s.tv = binary_tv(lp, in.mu_logp);
  s.kl = binary_kl(lp, in.mu_logp, config.kl_eps);
  if (has_topk) {
    s.topk_tv = topk_tv(in.topk_logp, in.topk_mu_logp);
    s.topk_kl = topk_kl(in.topk_logp, in.topk_mu_logp);
  }
  torch::Tensor pos = in.advantage > 0;
  terms.keep =
      v.drop ? v.drop(config, s, pos).logical_not().to(lp.scalar_type()) : torch::ones_like(lp);
  terms.ratio = s.ratio;
  terms.tv = has_topk ? s.topk_tv : s.tv;
  terms.kl = has_topk ? s.topk_kl : s.kl;
  torch::Tensor coefficient = -in.advantage * terms.keep;  // detached
  if (v.use_ratio) coefficient = coefficient * s.ratio.clamp_max(config.ratio_cap);
  terms.loss = (in.weight * coefficient * in.logp).sum();
  return terms;
}

ScoredTokens score_tokens(const torch::Tensor& logits, const torch::Tensor& targets,
                          const torch::Tensor& topk_ids) {
  ScoredTokens out;
  torch::Tensor lsm = torch::log_softmax(logits, -1);
  out.logp = lsm.gather(1, targets.unsqueeze(1)).squeeze(1);
  if (topk_ids.defined()) out.topk_logp = lsm.gather(1, topk_ids);
  torch::NoGradGuard no_grad;
  torch::Tensor d = lsm.detach();
  out.entropy = -(d.exp() * d).sum(-1);
  return out;
}

void MetricSums::add(const LossInputs& in, const LossTerms& terms, const torch::Tensor& entropy) {
  torch::NoGradGuard no_grad;
  torch::Tensor lp = in.logp.detach().to(torch::kFloat64);
  torch::Tensor mlp = in.mu_logp.to(torch::kFloat64);
  torch::Tensor p = lp.exp(), mu = mlp.exp();
  torch::Tensor dropped = 1 - terms.keep.to(torch::kFloat64);
  torch::Tensor pos = (in.advantage > 0).to(torch::kFloat64);
  n_ += static_cast<double>(lp.numel());
  masked_ += total(dropped);
  pos_ += total(pos);
  pos_masked_ += total(dropped * pos);
  neg_ += static_cast<double>(lp.numel()) - total(pos);
  neg_masked_ += total(dropped * (1 - pos));
  tv_sum_ += total(terms.tv);
  tv_max_ = std::max(tv_max_, max_or_zero(terms.tv));
  kl_sum_ += total(terms.kl);
  kl_max_ = std::max(kl_max_, max_or_zero(terms.kl));
  chi2_sum_ += total((terms.ratio.to(torch::kFloat64) - 1).pow(2));
  p_sum_ += total(p);
  mu_sum_ += total(mu);
  pp_sum_ += total(p * p);
  mumu_sum_ += total(mu * mu);
  pmu_sum_ += total(p * mu);
  log_ppl_sum_ += total(mlp - lp);
  entropy_sum_ += total(entropy);
}

void MetricSums::add_sft(const torch::Tensor& logp, const torch::Tensor& entropy) {
  n_ += static_cast<double>(logp.numel());
  entropy_sum_ += total(entropy);
}

void MetricSums::finish(StepMetrics* m) const {
  if (n_ == 0) return;
  m->masked_fraction = masked_ / n_;
  m->masked_fraction_pos = pos_ > 0 ? pos_masked_ / pos_ : 0.0;
  m->masked_fraction_neg = neg_ > 0 ? neg_masked_ / neg_ : 0.0;
  m->tv_mean = tv_sum_ / n_;
  m->tv_max = tv_max_;
  m->kl_mean = kl_sum_ / n_;
  m->kl_max = kl_max_;
  m->chi2 = chi2_sum_ / n_;
  const double cov = pmu_sum_ / n_ - (p_sum_ / n_) * (mu_sum_ / n_);
  const double var_p = pp_sum_ / n_ - (p_sum_ / n_) * (p_sum_ / n_);
  const double var_mu = mumu_sum_ / n_ - (mu_sum_ / n_) * (mu_sum_ / n_);
  m->pearson_p_mu = (var_p > 1e-18 && var_mu > 1e-18) ? cov / std::sqrt(var_p * var_mu) : 0.0;
  m->log_ppl_diff = log_ppl_sum_ / n_;
  m->entropy = entropy_sum_ / n_;
}

}  // namespace stoa::train
