#include "app/demo/demo_report.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "app/plot/plot_data.h"
#include "roles/trainer/step_log.h"

namespace stoa::app {

std::string rl_progress_line(const nlohmann::json& st, double elapsed_s) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(0);
  o << "rl " << static_cast<int>(elapsed_s) / 60 << "m" << static_cast<int>(elapsed_s) % 60
    << "s  step " << st.value("step", 0);
  if (st.contains("latest_version") && !st["latest_version"].is_null())
    o << "  version " << st["latest_version"].get<int64_t>();
  const auto& c = st.contains("counters") ? st["counters"] : nlohmann::json::object();
  o << "  rollouts " << c.value("rollouts_accepted", 0.0);
  if (c.contains("rollouts_verified"))
    o << "  verified " << c.value("rollouts_verified", 0.0) << " (failed "
      << c.value("verification_failures", 0.0) << ")";
  if (c.contains("peer_checks_passed"))
    o << "  peer-checked "
      << c.value("peer_checks_passed", 0.0) + c.value("peer_checks_failed", 0.0) << " (escalated "
      << c.value("checks_escalated", 0.0) << ", canaries " << c.value("canary_checks_leased", 0.0)
      << ")";
  if (st.contains("last_step")) {
    const auto& s = st["last_step"];
    o.precision(3);
    o << "  reward " << s.value("reward_mean", 0.0);
    o.precision(2);
    o << "  masked " << 100.0 * s.value("masked_fraction", 0.0) << "%";
    o.precision(4);
    o << "  tv " << s.value("tv", 0.0);
    o.precision(2);
    o << "  busy " << s.value("busy_fraction", 0.0);
  }
  o.precision(0);
  if (st.contains("workers")) {
    o << "  workers:";
    for (const auto& w : st["workers"]) {
      o << " " << w.value("name", std::string("?")) << "=" << w.value("tokens_per_s", 0.0)
        << "tok/s";
      if (w.contains("patch_lag")) o << "(lag " << w["patch_lag"].get<int64_t>() << ")";
    }
  }
  return o.str();
}

nlohmann::json summarize_step_log(const std::string& path) {
  // The same reader and summary as `stoa plot` and `stoa bench fleet` (roles/trainer/step_log.h),
  // so no two reports can read a step log differently; here a figure over nothing reads 0.
  const trainer::StepSummary s =
      trainer::summarize_steps(trainer::read_step_log(path, /*missing_ok=*/true).records);
  auto or0 = [](double x) { return std::isnan(x) ? 0.0 : x; };
  return {{"steps", s.steps},
          {"last_version", s.last_version},
          {"tokens_trained", s.tokens_trained},
          {"dppo_masked_fraction", or0(s.masked_fraction)},
          {"tv_mean", or0(s.tv_mean)},
          {"kl_mean", or0(s.kl_mean)},
          {"trainer_compute_seconds", s.compute_seconds},
          {"trainer_wall_seconds", s.wall_seconds},
          {"busy_fraction", or0(s.busy_fraction)},
          {"patch_bytes_mean", or0(s.patch_bytes_mean)},
          {"patches", static_cast<double>(s.patches)},
          {"anchors", static_cast<double>(s.anchors)},
          {"anchor_bytes_mean", or0(s.anchor_bytes_mean)},
          {"groups_dropped_stale", static_cast<double>(s.groups_dropped_stale)},
          {"groups_uniform", static_cast<double>(s.groups_uniform)},
          {"reward_first_quarter", or0(s.reward_first_quarter)},
          {"reward_last_quarter", or0(s.reward_last_quarter)},
          {"tv_first_quarter", or0(s.tv_first_quarter)},
          {"tv_last_quarter", or0(s.tv_last_quarter)},
          {"reward_level", trainer::kRewardLevel},
          {"seconds_to_reward_level", s.seconds_to_reward_level}};
}

std::string sft_progress_line(const nlohmann::json& j) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "sft: step %lld  epoch %lld  loss %.3f  lr %.2e",
                static_cast<long long>(j.value("step", int64_t{0})),
                static_cast<long long>(j.value("epoch", int64_t{0})), j.value("loss", 0.0),
                j.value("lr", 0.0));
  return buf;
}

nlohmann::json verification_cost(const nlohmann::json& c, double generation_cpu_s) {
  const double submitted = c.value("rollouts_accepted", 0.0) + c.value("rollouts_rejected", 0.0);
  const double verified = c.value("rollouts_verified", 0.0);
  const double validation_cpu_s = c.value("verification_cpu_seconds", 0.0);
  const double generation_per = submitted > 0 ? generation_cpu_s / submitted : 0.0;
  const double validation_per = verified > 0 ? validation_cpu_s / verified : 0.0;
  return {{"generation_cpu_s", generation_cpu_s},
          {"generation_cpu_s_per_rollout", generation_per},
          {"validation_cpu_s", validation_cpu_s},
          {"validation_cpu_s_per_rollout", validation_per},
          {"validation_cpu_fraction", generation_per > 0 ? validation_per / generation_per : 0.0}};
}

std::string verification_summary_lines(const nlohmann::json& s) {
  if (!s.contains("generation_cpu_s")) return "";
  std::ostringstream o;
  o.setf(std::ios::fixed);
  const double verified = s.value("rollouts_verified", 0.0);
  if (verified > 0) {
    o.precision(0);
    o << "verification: " << verified << " rollouts replayed, "
      << s.value("verification_failures", 0.0) << " failed, " << s.value("workers_quarantined", 0.0)
      << " workers quarantined";
    if (s.contains("rollouts_verified_by_target") && !s["rollouts_verified_by_target"].empty()) {
      o << "; by kernel target (pass/fail):";
      for (const auto& [target, n] : s["rollouts_verified_by_target"].items())
        o << " " << target << " " << n.value("pass", 0.0) << "/" << n.value("fail", 0.0);
    }
    o << "\n";
  }
  o.precision(1);
  o << "cpu: generation " << s.value("generation_cpu_s", 0.0) << " CPU-s";
  o.precision(4);
  o << " (" << s.value("generation_cpu_s_per_rollout", 0.0) << " a rollout)";
  if (verified > 0) {
    o.precision(1);
    o << ", validation " << s.value("validation_cpu_s", 0.0) << " CPU-s";
    o.precision(4);
    o << " (" << s.value("validation_cpu_s_per_rollout", 0.0) << " a replayed rollout)";
    o.precision(1);
    o << ": validation per rollout = " << 100.0 * s.value("validation_cpu_fraction", 0.0)
      << " % of generation";
  }
  o << "\n";
  return o.str();
}

nlohmann::json read_comparable_results(const std::string& path, const nlohmann::json& key) {
  std::ifstream in(path);
  if (!in.good()) return nullptr;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || j.value("comparability", nlohmann::json()) != key) return nullptr;
  return j;
}

}  // namespace stoa::app
