// The policy losses against hand-computed values: every variant's mask on both advantage signs,
// the loss value and its gradient with respect to log p, the divergences, the advantages, and a
// finite-difference check (double precision) of the gradient through the softmax.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "train/losses.h"
#include "train/rollout.h"

namespace stoa::train {
namespace {

torch::Tensor vec(std::vector<double> v) {
  return torch::tensor(v, torch::TensorOptions().dtype(torch::kFloat64));
}

// Five tokens chosen so the variants disagree:
//   t  p     μ     A    p−μ    p/μ    binary KL(μ‖p)
//   0  0.50  0.30  +1   +0.20  1.667  0.0823
//   1  0.30  0.50  +1   −0.20  0.600  0.0872
//   2  0.90  0.60  −1   +0.30  1.500  0.3112
//   3  0.20  0.40  −1   −0.20  0.500  0.1047
//   4  0.15  0.02  +1   +0.13  7.500  0.0992
const std::vector<double> kP = {0.5, 0.3, 0.9, 0.2, 0.15};
const std::vector<double> kMu = {0.3, 0.5, 0.6, 0.4, 0.02};
const std::vector<double> kA = {1, 1, -1, -1, 1};

struct Result {
  std::vector<double> keep;
  double loss;
  std::vector<double> grad;  // d loss / d log p
};

Result run(const LossConfig& config) {
  std::vector<double> logp;
  for (double p : kP) logp.push_back(std::log(p));
  std::vector<double> mu_logp;
  for (double m : kMu) mu_logp.push_back(std::log(m));
  LossInputs in;
  in.logp = vec(logp).requires_grad_(true);
  in.mu_logp = vec(mu_logp);
  in.advantage = vec(kA);
  in.weight = torch::full({5}, 0.2, torch::kFloat64);  // token-mean over 5 tokens
  LossTerms terms = policy_loss(config, in);
  terms.loss.backward();
  Result r;
  for (int i = 0; i < 5; ++i) {
    r.keep.push_back(terms.keep[i].item<double>());
    r.grad.push_back(in.logp.grad()[i].item<double>());
  }
  r.loss = terms.loss.item<double>();
  return r;
}

// ℓ = Σ_t w·(−A_t·r_t·M_t·log p_t); its gradient in log p_t is w·(−A_t·r_t·M_t).
void expect_loss(const Result& r, const std::vector<double>& keep,
                 const std::vector<double>& ratio) {
  double loss = 0;
  for (int t = 0; t < 5; ++t) {
    EXPECT_EQ(r.keep[t], keep[t]) << "token " << t;
    loss += 0.2 * (-kA[t] * ratio[t] * keep[t] * std::log(kP[t]));
    EXPECT_NEAR(r.grad[t], 0.2 * (-kA[t] * ratio[t] * keep[t]), 1e-12) << "token " << t;
  }
  EXPECT_NEAR(r.loss, loss, 1e-12);
}

const std::vector<double> kRatio = {0.5 / 0.3, 0.3 / 0.5, 0.9 / 0.6, 0.2 / 0.4, 0.15 / 0.02};

TEST(Losses, DppoBinaryTv) {
  LossConfig c;
  c.kind = LossKind::kDppoBinaryTv;  // δ = 0.15 / 0.15
  Result r = run(c);
  // t0: A>0, p−μ = 0.2 > 0.15 → drop. t1: A>0 but p fell → keep. t2: A<0 but p rose → keep.
  // t3: A<0, p−μ = −0.2 < −0.15 → drop. t4: p−μ = 0.13 ≤ 0.15 → keep.
  expect_loss(r, {0, 1, 1, 0, 1}, kRatio);
  // Hand value: 0.2·(−0.6·ln 0.3 + 1.5·ln 0.9 − 7.5·ln 0.15) = 0.2·(0.72238 − 0.15804 + 14.22840)
  EXPECT_NEAR(r.loss, 2.958548, 1e-5);
}

TEST(Losses, DppoBinaryTvAsymmetricThresholds) {
  LossConfig c;
  c.kind = LossKind::kDppoBinaryTv;
  c.delta_hi = 0.25;  // t0 (+0.20) now inside on the positive side
  c.delta_lo = 0.10;
  Result r = run(c);
  expect_loss(r, {1, 1, 1, 0, 1}, kRatio);
}

TEST(Losses, DppoBinaryKl) {
  LossConfig c;
  c.kind = LossKind::kDppoBinaryKl;
  c.delta_hi = c.delta_lo = 0.05;
  Result r = run(c);
  // KL > 0.05 for all; dropped where p moved along the advantage: t0 (A>0, p>μ), t3 (A<0,
  // p<μ), t4 (A>0, p>μ; TV kept it: 0.13 < 0.15 but KL = 0.099 > 0.05).
  expect_loss(r, {0, 1, 1, 0, 0}, kRatio);
}

TEST(Losses, PpoClip) {
  LossConfig c;
  c.kind = LossKind::kPpoClip;  // ε = 0.2
  Result r = run(c);
  // t0 r=1.67 > 1.2 (A>0) drop; t1 0.6 (A>0) keep; t2 1.5 (A<0) keep; t3 0.5 < 0.8 (A<0)
  // drop; t4 7.5 > 1.2 (A>0) drop.
  expect_loss(r, {0, 1, 1, 0, 0}, kRatio);
}

TEST(Losses, PpoClipAdvantageSignDecides) {
  LossConfig c;
  c.kind = LossKind::kPpoClip;
  c.clip_eps_hi = c.clip_eps_lo = 0.6;  // [0.4, 1.6]: only t0 (1.67) and t4 (7.5) leave it high
  Result r = run(c);
  expect_loss(r, {0, 1, 1, 1, 0}, kRatio);
}

TEST(Losses, TruncatedIsHasNoMaskAndCapsTheRatio) {
  LossConfig c;
  c.kind = LossKind::kTruncatedIs;
  c.ratio_cap = 2.0;
  Result r = run(c);
  expect_loss(r, {1, 1, 1, 1, 1}, {0.5 / 0.3, 0.6, 1.5, 0.5, 2.0});
}

TEST(Losses, OnPolicyPgIsPlainLogLikelihood) {
  LossConfig c;
  c.kind = LossKind::kOnPolicyPg;
  Result r = run(c);
  expect_loss(r, {1, 1, 1, 1, 1}, {1, 1, 1, 1, 1});
}

TEST(Losses, RatioCapAppliesToDppo) {
  LossConfig c;
  c.kind = LossKind::kDppoBinaryTv;
  c.ratio_cap = 1.0;
  Result r = run(c);
  expect_loss(r, {0, 1, 1, 0, 1}, {1.0, 0.6, 1.0, 0.5, 1.0});
}

TEST(Losses, TopKDivergencesByHand) {
  // π_k = [0.5, 0.2], μ_k = [0.3, 0.4]; rest π 0.3, μ 0.3.
  torch::Tensor pi = vec({std::log(0.5), std::log(0.2)}).view({1, 2});
  torch::Tensor mu = vec({std::log(0.3), std::log(0.4)}).view({1, 2});
  EXPECT_NEAR(topk_tv(pi, mu).item<double>(), 0.5 * (0.2 + 0.2 + 0.0), 1e-12);
  EXPECT_NEAR(topk_kl(pi, mu).item<double>(), 0.3 * std::log(0.3 / 0.5) + 0.4 * std::log(0.4 / 0.2),
              1e-12);
  // Binary: |p − μ| and μ·ln(μ/p) + (1−μ)·ln((1−μ)/(1−p)) for p = 0.5, μ = 0.3.
  torch::Tensor lp = vec({std::log(0.5)}), lm = vec({std::log(0.3)});
  EXPECT_NEAR(binary_tv(lp, lm).item<double>(), 0.2, 1e-12);
  EXPECT_NEAR(binary_kl(lp, lm, 1e-12).item<double>(),
              0.3 * std::log(0.3 / 0.5) + 0.7 * std::log(0.7 / 0.5), 1e-9);
}

// Two tokens with top-2 reports; the sampled token is the first id of each row.
Result run_topk(LossKind kind, double delta, std::vector<double> adv) {
  LossInputs in;
  in.logp = vec({std::log(0.5), std::log(0.32)}).requires_grad_(true);
  in.mu_logp = vec({std::log(0.3), std::log(0.3)});
  in.advantage = vec(adv);
  in.weight = vec({0.5, 0.5});
  in.topk_logp = vec({std::log(0.5), std::log(0.2), std::log(0.32), std::log(0.2)}).view({2, 2});
  in.topk_mu_logp = vec({std::log(0.3), std::log(0.4), std::log(0.3), std::log(0.25)}).view({2, 2});
  LossConfig c;
  c.kind = kind;
  c.delta_hi = c.delta_lo = delta;
  LossTerms t = policy_loss(c, in);
  t.loss.backward();
  return {{t.keep[0].item<double>(), t.keep[1].item<double>()},
          t.loss.item<double>(),
          {in.logp.grad()[0].item<double>(), in.logp.grad()[1].item<double>()}};
}

TEST(Losses, DppoTopkTvAndKl) {
  // Row 0: TV 0.2, KL 0.124 (above); row 1: π = [0.32, 0.2, rest 0.48], μ = [0.3, 0.25, rest
  // 0.45]: TV = ½(0.02 + 0.05 + 0.03) = 0.05, KL ≈ 0.0077 (below). Both rows have p > μ.
  Result tv_pos = run_topk(LossKind::kDppoTopkTv, 0.15, {1, 1});
  EXPECT_EQ(tv_pos.keep, (std::vector<double>{0, 1}));
  EXPECT_NEAR(tv_pos.loss, 0.5 * (-1 * (0.32 / 0.3) * std::log(0.32)), 1e-12);
  // Negative advantage: p rose, i.e. against the push: nothing is dropped.
  Result tv_neg = run_topk(LossKind::kDppoTopkTv, 0.15, {-1, -1});
  EXPECT_EQ(tv_neg.keep, (std::vector<double>{1, 1}));
  EXPECT_NEAR(tv_neg.grad[0], 0.5 * (0.5 / 0.3), 1e-12);
  Result kl_pos = run_topk(LossKind::kDppoTopkKl, 0.05, {1, 1});
  EXPECT_EQ(kl_pos.keep, (std::vector<double>{0, 1}));
  Result kl_tight = run_topk(LossKind::kDppoTopkKl, 0.005, {1, 1});
  EXPECT_EQ(kl_tight.keep, (std::vector<double>{0, 0}));
}

TEST(Losses, TopkVariantWithoutReportIsAnError) {
  LossInputs in;
  in.logp = vec({-1.0});
  in.mu_logp = vec({-1.0});
  in.advantage = vec({1.0});
  in.weight = vec({1.0});
  LossConfig c;
  c.kind = LossKind::kDppoTopkKl;
  EXPECT_THROW(policy_loss(c, in), Error);
}

TEST(Losses, MaskedFractionMetrics) {
  std::vector<double> logp, mu_logp;
  for (int t = 0; t < 5; ++t) {
    logp.push_back(std::log(kP[t]));
    mu_logp.push_back(std::log(kMu[t]));
  }
  LossInputs in{vec(logp), vec(mu_logp), vec(kA), torch::full({5}, 0.2, torch::kFloat64), {}, {}};
  LossConfig c;
  c.kind = LossKind::kDppoBinaryTv;
  LossTerms terms = policy_loss(c, in);
  MetricSums sums;
  sums.add(in, terms, vec({1, 1, 1, 1, 1}));
  StepMetrics m;
  sums.finish(&m);
  EXPECT_DOUBLE_EQ(m.masked_fraction, 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(m.masked_fraction_pos, 1.0 / 3.0);  // t0 of {t0, t1, t4}
  EXPECT_DOUBLE_EQ(m.masked_fraction_neg, 1.0 / 2.0);  // t3 of {t2, t3}
  EXPECT_NEAR(m.tv_mean, (0.2 + 0.2 + 0.3 + 0.2 + 0.13) / 5, 1e-12);
  EXPECT_NEAR(m.tv_max, 0.3, 1e-12);
  double chi2 = 0;
  for (double r : kRatio) chi2 += (r - 1) * (r - 1);
  EXPECT_NEAR(m.chi2, chi2 / 5, 1e-9);
  EXPECT_NEAR(m.entropy, 1.0, 1e-12);
  // Pearson correlation of p and μ by hand.
  double mp = 0, mm = 0;
  for (int t = 0; t < 5; ++t) mp += kP[t] / 5, mm += kMu[t] / 5;
  double cov = 0, vp = 0, vm = 0;
  for (int t = 0; t < 5; ++t) {
    cov += (kP[t] - mp) * (kMu[t] - mm);
    vp += (kP[t] - mp) * (kP[t] - mp);
    vm += (kMu[t] - mm) * (kMu[t] - mm);
  }
  EXPECT_NEAR(m.pearson_p_mu, cov / std::sqrt(vp * vm), 1e-9);
}

TEST(Advantages, GrpoAndDrGrpo) {
  RolloutGroup g{"g", {}};
  for (double r : {1.0, 0.0, 0.0, 1.0, 1.0}) {
    Rollout x;
    x.reward = r;
    g.rollouts.push_back(x);
  }
  // mean 0.6; deviations +0.4/−0.6; unbiased variance (3·0.16 + 2·0.36)/4 = 0.3.
  std::vector<double> dr = group_advantages(g, AdvantageKind::kDrGrpo);
  EXPECT_NEAR(dr[0], 0.4, 1e-12);
  EXPECT_NEAR(dr[1], -0.6, 1e-12);
  std::vector<double> grpo = group_advantages(g, AdvantageKind::kGrpo, 0.0);
  EXPECT_NEAR(grpo[0], 0.4 / std::sqrt(0.3), 1e-12);
  EXPECT_NEAR(grpo[2], -0.6 / std::sqrt(0.3), 1e-12);
  RolloutGroup same{"same", {}};
  same.rollouts.resize(3);
  for (double a : group_advantages(same, AdvantageKind::kGrpo)) EXPECT_EQ(a, 0.0);
}

// Gradient through the softmax, in double: the DPPO loss's gradient must equal the gradient of
// the masked surrogate Σ w·(−A·M·p/μ) (reference.md §1: sg(r)·∇log p = ∇p/μ), checked by central
// finite differences on the logits.
TEST(Losses, FiniteDifferenceGradientBinaryTv) {
  torch::manual_seed(3);
  const int64_t N = 6, V = 7;
  torch::Tensor logits = torch::randn({N, V}, torch::kFloat64);
  torch::Tensor targets = torch::randint(0, V, {N}, torch::kInt64);
  torch::Tensor mu_logp = torch::log_softmax(torch::randn({N, V}, torch::kFloat64), -1)
                              .gather(1, targets.unsqueeze(1))
                              .squeeze(1);
  torch::Tensor adv = vec({1.0, -0.5, 2.0, -1.0, 0.7, -0.3});
  torch::Tensor weight = torch::full({N}, 1.0 / N, torch::kFloat64);
  LossConfig c;
  c.kind = LossKind::kDppoBinaryTv;
  c.delta_hi = c.delta_lo = 0.1;
  torch::Tensor z = logits.clone().requires_grad_(true);
  ScoredTokens s = score_tokens(z, targets, {});
  LossTerms terms = policy_loss(c, {s.logp, mu_logp, adv, weight, {}, {}});
  terms.loss.backward();
  torch::Tensor keep = terms.keep;
  EXPECT_GT(keep.sum().item<double>(), 0.0);
  EXPECT_LT(keep.sum().item<double>(), static_cast<double>(N));  // some dropped: masks matter
  auto surrogate = [&](const torch::Tensor& x) {
    torch::Tensor p = torch::softmax(x, -1).gather(1, targets.unsqueeze(1)).squeeze(1);
    return (weight * -adv * keep * p / mu_logp.exp()).sum().item<double>();
  };
  const double h = 1e-6;
  double max_err = 0;
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j < V; ++j) {
      torch::Tensor plus = logits.clone(), minus = logits.clone();
      plus[i][j] += h;
      minus[i][j] -= h;
      const double fd = (surrogate(plus) - surrogate(minus)) / (2 * h);
      max_err = std::max(max_err, std::abs(fd - z.grad()[i][j].item<double>()));
    }
  }
  EXPECT_LT(max_err, 1e-8);
}

}  // namespace
}  // namespace stoa::train
