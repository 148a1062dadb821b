#include "train/mismatch.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace stoa::train {

double binary_tv_of(double p, double mu) {
  return std::abs(p - mu);
}

double binary_kl_of(double p, double mu, double eps) {
  return mu * (std::log(mu + eps) - std::log(p + eps)) +
         (1 - mu) * (std::log(1 - mu + eps) - std::log(1 - p + eps));
}

MismatchAccumulator::MismatchAccumulator(const LossConfig& tv_config, const LossConfig& kl_config)
    : tv_(tv_config), kl_(kl_config) {
  validate_loss_config(tv_);
  validate_loss_config(kl_);
}

void MismatchAccumulator::add(double logp, double mu_logp) {
  STOA_CHECK(std::isfinite(logp) && std::isfinite(mu_logp) && logp <= 0 && mu_logp <= 0,
             ErrorKind::kInvalidArgument,
             "mismatch: log-probabilities must be finite and <= 0, got ", logp, " (pi) and ",
             mu_logp, " (mu)");
  const double p = std::exp(logp), mu = std::exp(mu_logp);
  const double tv = binary_tv_of(p, mu);
  const double kl = binary_kl_of(p, mu, kl_.kl_eps);
  tv_values_.push_back(tv);
  kl_values_.push_back(kl);
  log_ppl_sum_ += mu_logp - logp;
  // The drop rules of losses.cpp: Binary-TV drops p − μ > δ_hi (A > 0) or p − μ < −δ_lo (A ≤ 0);
  // Binary-KL drops KL > δ on the side where the update would push further away.
  tv_pos_ += p - mu > tv_.delta_hi;
  tv_neg_ += p - mu < -tv_.delta_lo;
  kl_pos_ += kl > kl_.delta_hi && p > mu;
  kl_neg_ += kl > kl_.delta_lo && p < mu;
}

namespace {
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}
double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}
}  // namespace

MismatchStats MismatchAccumulator::finish() const {
  MismatchStats s;
  s.tokens = static_cast<int64_t>(tv_values_.size());
  if (s.tokens == 0) return s;
  const double n = static_cast<double>(s.tokens);
  s.tv_mean = mean(tv_values_);
  s.tv_p99 = quantile(tv_values_, 0.99);
  s.tv_max = *std::max_element(tv_values_.begin(), tv_values_.end());
  s.kl_mean = mean(kl_values_);
  s.kl_p99 = quantile(kl_values_, 0.99);
  s.kl_max = *std::max_element(kl_values_.begin(), kl_values_.end());
  s.log_ppl_diff = log_ppl_sum_ / n;
  s.masked_tv_if_positive = static_cast<double>(tv_pos_) / n;
  s.masked_tv_if_negative = static_cast<double>(tv_neg_) / n;
  s.masked_kl_if_positive = static_cast<double>(kl_pos_) / n;
  s.masked_kl_if_negative = static_cast<double>(kl_neg_) / n;
  return s;
}

}  // namespace stoa::train
