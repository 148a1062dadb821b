// The behaviour/target mismatch of sampled tokens, measured the way the DPPO trainer sees it but
// without training: per trainable token, the binary TV |π − μ| and binary KL(μ‖π) of the sampled
// token (π = the trainer's probability, μ = the worker's), and the fraction of tokens the Binary-TV
// and Binary-KL trust regions would mask for a positive and for a negative advantage. Used by
// `stoa experiment mismatch` (int8 vs f32 workers, issue 8); torch-free so it can be tested
// against the trainer's own definitions in losses.cpp.
#pragma once
#include <cstdint>
#include <vector>

#include "train/loss_config.h"

namespace stoa::train {

struct MismatchStats {
  int64_t tokens = 0;
  double tv_mean = 0, tv_p99 = 0, tv_max = 0;
  double kl_mean = 0, kl_p99 = 0, kl_max = 0;
  double log_ppl_diff = 0;  // mean (log μ − log π)
  // Fractions of tokens the trust region would drop (losses.cpp's rules), by advantage sign.
  double masked_tv_if_positive = 0, masked_tv_if_negative = 0;
  double masked_kl_if_positive = 0, masked_kl_if_negative = 0;
};

class MismatchAccumulator {
 public:
  // tv_config / kl_config: the Binary-TV and Binary-KL thresholds (delta_hi, delta_lo; kl_eps).
  MismatchAccumulator(const LossConfig& tv_config, const LossConfig& kl_config);
  // One trainable token: log π and log μ of the sampled token. Throws kInvalidArgument for a
  // non-finite or positive log-probability.
  void add(double logp, double mu_logp);
  MismatchStats finish() const;

 private:
  LossConfig tv_, kl_;
  std::vector<double> tv_values_, kl_values_;
  double log_ppl_sum_ = 0;
  int64_t tv_pos_ = 0, tv_neg_ = 0, kl_pos_ = 0, kl_neg_ = 0;
};

// The binary divergences of one sampled token (p = π(a), mu = μ(a)), as losses.cpp defines them.
double binary_tv_of(double p, double mu);
double binary_kl_of(double p, double mu, double eps);

}  // namespace stoa::train
