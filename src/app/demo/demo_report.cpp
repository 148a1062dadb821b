#include "app/demo/demo_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "app/plot/plot_data.h"

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
  // The same line parser as `stoa plot` (plot_data.h), so the summary and the charts can never
  // read a step log differently; a metric absent from a line counts as 0 here.
  std::ifstream in(path);
  std::vector<plot::StepPoint> steps;
  std::string line, why;
  while (std::getline(in, line)) {
    if (auto s = plot::parse_step_line(line, &why)) steps.push_back(std::move(*s));
  }
  auto or0 = [](double x) { return std::isnan(x) ? 0.0 : x; };
  double tokens = 0, masked = 0, tv = 0, kl = 0, compute_s = 0, busy = 0;
  double patch_sum = 0, patches = 0, anchors = 0, anchor_sum = 0, dropped_groups = 0;
  double uniform_groups = 0;
  int64_t last_version = -1;
  for (const auto& s : steps) {
    const double t = or0(s.tokens);
    tokens += t;
    masked += t * or0(s.masked_fraction);
    tv += t * or0(s.tv_mean);
    kl += t * or0(s.kl_mean);
    compute_s += or0(s.step_seconds);
    busy += or0(s.busy_fraction);
    dropped_groups += or0(s.groups_dropped_stale);
    uniform_groups += or0(s.groups_uniform);
    if (or0(s.patch_bytes) > 0) {
      patch_sum += s.patch_bytes;
      ++patches;
    }
    if (or0(s.anchor_bytes) > 0) {
      anchor_sum += s.anchor_bytes;
      ++anchors;
    }
    last_version = std::max(last_version, s.version);
  }
  // Mean of a per-step metric over the first or last quarter of the steps.
  auto quarter_mean = [&](double plot::StepPoint::*metric, bool last) {
    if (steps.empty()) return 0.0;
    const size_t q = std::max<size_t>(1, steps.size() / 4);
    double r = 0;
    for (size_t i = 0; i < q; ++i) r += or0(steps[last ? steps.size() - 1 - i : i].*metric);
    return r / static_cast<double>(q);
  };
  // Wall clock (the trainer's elapsed_s) at which the mean training reward of the last
  // kRewardWindow steps first reached kRewardLevel; -1 if it never did. The ablations compare how
  // fast each variant learns with it (pass@1 is measured only at the end).
  double seconds_to_level = -1, window_sum = 0;
  for (size_t i = 0; i < steps.size() && seconds_to_level < 0; ++i) {
    window_sum += or0(steps[i].reward_mean);
    if (i >= kRewardWindow) window_sum -= or0(steps[i - kRewardWindow].reward_mean);
    if (i + 1 >= kRewardWindow && window_sum / kRewardWindow >= kRewardLevel)
      seconds_to_level = or0(steps[i].elapsed_s);
  }
  const double n = static_cast<double>(steps.size());
  return {{"steps", steps.size()},
          {"last_version", last_version},
          {"tokens_trained", tokens},
          {"dppo_masked_fraction", tokens > 0 ? masked / tokens : 0.0},
          {"tv_mean", tokens > 0 ? tv / tokens : 0.0},
          {"kl_mean", tokens > 0 ? kl / tokens : 0.0},
          {"trainer_compute_seconds", compute_s},
          {"busy_fraction_mean", n > 0 ? busy / n : 0.0},
          {"patch_bytes_mean", patches > 0 ? patch_sum / patches : 0.0},
          {"patches", patches},
          {"anchors", anchors},
          {"anchor_bytes_mean", anchors > 0 ? anchor_sum / anchors : 0.0},
          {"groups_dropped_stale", dropped_groups},
          {"groups_uniform", uniform_groups},
          {"reward_first_quarter", quarter_mean(&plot::StepPoint::reward_mean, false)},
          {"reward_last_quarter", quarter_mean(&plot::StepPoint::reward_mean, true)},
          {"tv_first_quarter", quarter_mean(&plot::StepPoint::tv_mean, false)},
          {"tv_last_quarter", quarter_mean(&plot::StepPoint::tv_mean, true)},
          {"reward_level", kRewardLevel},
          {"seconds_to_reward_level", seconds_to_level}};
}

std::string sft_progress_line(const nlohmann::json& j) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "sft: step %lld  epoch %lld  loss %.3f  lr %.2e",
                static_cast<long long>(j.value("step", int64_t{0})),
                static_cast<long long>(j.value("epoch", int64_t{0})), j.value("loss", 0.0),
                j.value("lr", 0.0));
  return buf;
}

nlohmann::json read_comparable_results(const std::string& path, const nlohmann::json& key) {
  std::ifstream in(path);
  if (!in.good()) return nullptr;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || j.value("comparability", nlohmann::json()) != key) return nullptr;
  return j;
}

}  // namespace stoa::app
