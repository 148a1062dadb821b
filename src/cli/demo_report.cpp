#include "cli/demo_report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

namespace stoa::cli {

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
  std::ifstream in(path);
  std::vector<nlohmann::json> steps;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("step")) steps.push_back(std::move(j));
  }
  double tokens = 0, masked = 0, tv = 0, kl = 0, compute_s = 0, busy = 0;
  double patch_sum = 0, patches = 0, anchors = 0, dropped_groups = 0;
  int64_t last_version = -1;
  for (const auto& s : steps) {
    const double t = s.value("tokens", 0.0);
    tokens += t;
    masked += t * s.value("masked_fraction", 0.0);
    tv += t * s.value("tv_mean", 0.0);
    kl += t * s.value("kl_mean", 0.0);
    compute_s += s.value("step_seconds", 0.0);
    busy += s.value("busy_fraction", 0.0);
    dropped_groups += s.value("groups_dropped_stale", 0.0);
    if (s.value("patch_bytes", 0.0) > 0) {
      patch_sum += s.value("patch_bytes", 0.0);
      ++patches;
    }
    if (s.value("anchor_bytes", 0.0) > 0) ++anchors;
    last_version = std::max<int64_t>(last_version, s.value("version", int64_t{-1}));
  }
  auto quarter_reward = [&](bool last) {
    if (steps.empty()) return 0.0;
    const size_t q = std::max<size_t>(1, steps.size() / 4);
    double r = 0;
    for (size_t i = 0; i < q; ++i)
      r += steps[last ? steps.size() - 1 - i : i].value("reward_mean", 0.0);
    return r / static_cast<double>(q);
  };
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
          {"groups_dropped_stale", dropped_groups},
          {"reward_first_quarter", quarter_reward(false)},
          {"reward_last_quarter", quarter_reward(true)}};
}

}  // namespace stoa::cli
