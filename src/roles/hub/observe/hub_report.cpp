#include "roles/hub/observe/hub_report.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "core/error.h"
#include "roles/hub/verification/verification_mode.h"

namespace stoa::hub {

using nlohmann::json;

namespace {
// Prometheus label values escape backslash, quote and newline.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}
// The per-worker label set: the id (stable across restarts) and the name it joined with.
std::string worker_labels(const nlohmann::json& w) {
  return label(w["id"].get<std::string>()) + "\",name=\"" + label(w["name"].get<std::string>());
}

std::string verification_metrics(const HubSnapshot& s) {
  const int64_t passed = s.verified_pass;
  const int64_t failed = s.verified_fail;
  const size_t quarantined = s.quarantined;
  std::string out = cat(
      "# HELP stoa_rollouts_verified_total Rollouts replayed by a validator, by verdict.\n",
      "# TYPE stoa_rollouts_verified_total counter\n",
      "stoa_rollouts_verified_total{result=\"pass\"} ", passed, "\n",
      "stoa_rollouts_verified_total{result=\"fail\"} ", failed, "\n",
      "# HELP stoa_workers_quarantined Workers refused after a failing replay.\n",
      "# TYPE stoa_workers_quarantined gauge\n", "stoa_workers_quarantined ", quarantined, "\n");
  // A family of its own rather than a `target` label on stoa_rollouts_verified_total, whose
  // {result} series dashboards and alerts already read. Labels are plain names (target_label).
  out +=
      "# HELP stoa_rollouts_verified_by_target_total Rollouts replayed by a validator, by the "
      "kernel target they were generated on and by verdict.\n"
      "# TYPE stoa_rollouts_verified_by_target_total counter\n";
  for (const auto& [target, counts] : s.verified_by_target)
    for (size_t fail = 0; fail < 2; ++fail)
      out += cat("stoa_rollouts_verified_by_target_total{target=\"", target, "\",result=\"",
                 fail ? "fail" : "pass", "\"} ", counts[fail], "\n");
  return out;
}
}  // namespace

std::map<std::string, double> counter_map(const HubSnapshot& s) {
  const auto& c = s.counters;
  std::map<std::string, double> m;
  m["rollouts_accepted"] = static_cast<double>(c.accepted);
  m["rollouts_duplicate"] = static_cast<double>(c.duplicate);
  int64_t rejected = 0;
  for (const auto& [r, n] : c.rejected) {
    rejected += n;
    m["rollouts_rejected_" + r] = static_cast<double>(n);
  }
  m["rollouts_rejected"] = static_cast<double>(rejected);
  int64_t dropped = 0;
  for (const auto& [r, n] : c.dropped) {
    dropped += n;
    m["groups_dropped_" + r] = static_cast<double>(n);
  }
  m["groups_dropped"] = static_cast<double>(dropped);
  m["groups_trained"] = static_cast<double>(c.groups_trained);
  m["groups_queued"] = static_cast<double>(s.groups_queued);
  m["leases_issued"] = static_cast<double>(c.leases_issued);
  m["leases_expired"] = static_cast<double>(c.leases_expired);
  m["leases_released"] = static_cast<double>(c.leases_released);
  m["leases_revoked"] = static_cast<double>(c.leases_revoked);
  m["leases_preempted"] = static_cast<double>(c.leases_preempted);
  m["groups_opened_for_waiting"] = static_cast<double>(c.groups_opened_for_waiting);
  m["leases_capped"] = static_cast<double>(c.leases_capped);
  m["leases_deferred"] = static_cast<double>(c.leases_deferred);
  m["lease_waiters"] = static_cast<double>(s.lease_waiters);
  m["workers_hoarding"] = static_cast<double>(s.hoarders);
  m["tokens_accepted"] = static_cast<double>(c.tokens_accepted);
  m["model_tokens_accepted"] = static_cast<double>(c.model_tokens_accepted);
  m["reward_mean_accepted"] = c.accepted ? c.reward_sum / static_cast<double>(c.accepted) : 0.0;
  m["workers"] = static_cast<double>(s.workers_total);
  m["workers_expired"] = static_cast<double>(c.workers_expired);
  m["resume_refused"] = static_cast<double>(c.resume_refused);
  m["ledger_writes"] = static_cast<double>(s.ledger.writes);
  m["ledger_commits"] = static_cast<double>(s.ledger.commits);
  m["ledger_writes_pending"] = static_cast<double>(s.ledger.pending);
  m["ledger_largest_commit"] = static_cast<double>(s.ledger.largest_batch);
  m["ledger_commit_seconds"] = s.ledger.commit_seconds;
  m["ledger_slowest_commit_seconds"] = s.ledger.slowest_commit_seconds;
  m["ledger_busy"] = static_cast<double>(c.ledger_busy);
  int64_t limited = 0;
  for (const auto& [r, n] : c.rate_limited) limited += n;
  m["rate_limited"] = static_cast<double>(limited);
  m["prompts_skipped_too_long"] = static_cast<double>(c.prompts_too_long.size());
  m["versions"] = static_cast<double>(s.versions);
  const LearningSignalWatch& signal = c.learning_signal;
  m["steps_without_signal"] = static_cast<double>(signal.steps_without_signal());
  m["steps_without_signal_consecutive"] = static_cast<double>(signal.streak());
  m["groups_uniform"] = static_cast<double>(signal.groups_uniform());
  for (const auto& [k, v] : s.verification) m[k] = v;
  return m;
}

// A worker heard from within this long counts in the fleet figures of the history.
constexpr int64_t kLiveWorkerMs = 60'000;

StepPoint step_point(const StepReport& report, int64_t t, int64_t start_ms,
                     std::optional<uint64_t> latest,
                     const std::map<std::string, WorkerStats>& workers) {
  StepPoint point;
  point.step = report.step;
  point.t_s = static_cast<double>(t - start_ms) / 1000.0;
  point.reward_mean = report.reward_mean;
  point.masked_fraction = report.masked_fraction;
  point.tv = report.tv;
  point.busy_fraction = report.busy_fraction;
  point.step_seconds = report.step_seconds;
  if (report.groups > 0)
    point.uniform_fraction =
        static_cast<double>(report.groups_uniform) / static_cast<double>(report.groups);
  point.no_signal = step_without_signal(report);
  double idle_sum = 0, lag_sum = 0;
  int64_t lagged = 0;
  for (const auto& [id, w] : workers) {
    if (t - w.last_seen_ms > kLiveWorkerMs) continue;
    ++point.workers;
    point.fleet_tokens_per_s += w.tokens_per_s;
    idle_sum += w.idle_fraction;
    if (latest && w.version) {
      lag_sum += static_cast<double>(*latest - std::min(*latest, *w.version));
      ++lagged;
    }
  }
  if (point.workers) point.worker_idle_fraction = idle_sum / static_cast<double>(point.workers);
  if (lagged) point.patch_lag_mean = lag_sum / static_cast<double>(lagged);
  return point;
}

json status_json(const HubSnapshot& snap, const ReportContext& context) {
  const auto& c = snap.counters;
  const auto latest = snap.latest_version;
  const int64_t t = snap.now_ms;
  json j;
  j["protocol"] = net::kProtocolVersion;
  j["task"] = context.task;
  j["uptime_s"] = static_cast<double>(t - c.start_ms) / 1000.0;
  j["latest_version"] = latest ? json(*latest) : json(nullptr);
  j["step"] = snap.step;
  j["counters"] = counter_map(snap);
  j["staleness_histogram"] = c.staleness;
  // Always there (an empty by_target when off), so a reader needs no presence check. The mode in
  // force and what it guarantees, one line each, and a warning where the run is weaker than it
  // looks (verification_mode.h).
  const VerificationMode mode =
      verification_mode(context.verify, snap.verification_on, context.beyond_loopback);
  j["verification"] = {{"enabled", snap.verification_on},
                       {"mode", mode.name},
                       {"guarantee", mode.guarantee},
                       {"by_target", json::object()}};
  if (!mode.warning.empty()) j["verification"]["warning"] = mode.warning;
  if (!snap.verification.empty()) {
    // Verdicts by the kernel target each rollout was generated on (workers may force one:
    // `stoa work --kernel-target`); replay is exact across targets, so honest ones all pass.
    json by_target = json::object();
    for (const auto& [target, counts] : snap.verified_by_target)
      by_target[target] = {{"pass", counts[0]}, {"fail", counts[1]}};
    j["verification"]["by_target"] = by_target;
  }
  {
    const LearningSignalWatch& signal = c.learning_signal;
    j["learning_signal"] = {{"steps", signal.steps()},
                            {"steps_without_signal", signal.steps_without_signal()},
                            {"consecutive_steps_without_signal", signal.streak()},
                            {"groups", signal.groups()},
                            {"groups_uniform", signal.groups_uniform()},
                            {"warn_after_steps", signal.warn_after()}};
    if (signal.warning()) j["learning_signal"]["warning"] = signal.warning_text();
  }
  j["leases_open"] = snap.leases_open;
  json workers = json::array();
  for (const auto& w : snap.workers) {
    json wj = {{"id", w.id},
               {"name", w.name},
               {"seen_s_ago", static_cast<double>(t - w.last_seen_ms) / 1000.0},
               {"version", w.version ? json(*w.version) : json(nullptr)},
               {"tokens_generated", w.tokens_generated},
               {"tokens_per_s", w.tokens_per_s},
               {"idle_fraction", w.idle_fraction},
               {"rollouts_accepted", w.rollouts_accepted},
               {"leases", w.leases_held},
               {"standing", w.standing}};
    if (latest && w.version) wj["patch_lag"] = *latest - std::min(*latest, *w.version);
    if (w.download) wj["download"] = net::to_json(*w.download);
    if (w.swarm) wj["swarm"] = net::to_json(*w.swarm);
    workers.push_back(wj);
  }
  j["workers"] = workers;
  j["workers_total"] = snap.workers_total;
  j["workers_offset"] = snap.offset;
  j["workers_limit"] = context.limit;
  if (const auto& s = c.last_step) {
    j["last_step"] = {{"step", s->step},
                      {"step_seconds", s->step_seconds},
                      {"busy_fraction", s->busy_fraction},
                      {"masked_fraction", s->masked_fraction},
                      {"tv", s->tv},
                      {"kl", s->kl},
                      {"reward_mean", s->reward_mean},
                      {"loss", s->loss},
                      {"groups", s->groups},
                      {"groups_uniform", s->groups_uniform},
                      {"tokens", s->tokens}};
    for (const auto& [k, v] : s->extra) j["last_step"]["extra"][k] = v;
  }
  return j;
}

std::string metrics_text(const HubSnapshot& snap, const ReportContext& context) {
  const json st = status_json(snap, context);
  auto cm = st["counters"].get<std::map<std::string, double>>();
  std::ostringstream o;
  auto gauge = [&](const std::string& name, const std::string& help, double v,
                   const char* type = "gauge") {
    o << "# HELP stoa_" << name << " " << help << "\n# TYPE stoa_" << name << " " << type << "\n"
      << "stoa_" << name << " " << v << "\n";
  };
  gauge("latest_version", "Latest published policy version",
        st["latest_version"].is_null() ? -1.0 : st["latest_version"].get<double>());
  gauge("versions_published", "Versions published", cm["versions"], "counter");
  gauge("trainer_step", "Last trainer step recorded", st["step"].get<double>(), "counter");
  gauge("queue_depth_groups", "Complete groups waiting for the trainer", cm["groups_queued"]);
  gauge("leases_open", "Open leases", st["leases_open"].get<double>());
  // Fair leasing (lease_fairness.h): requests refused or leases taken back, by why.
  o << "# HELP stoa_lease_refusals_total Lease requests answered no work now, by cause\n"
       "# TYPE stoa_lease_refusals_total counter\n"
    << "stoa_lease_refusals_total{cause=\"cap\"} " << cm["leases_capped"] << "\n"
    << "stoa_lease_refusals_total{cause=\"waiting_order\"} " << cm["leases_deferred"] << "\n";
  o << "# HELP stoa_leases_revoked_total Leases taken back from workers, by cause\n"
       "# TYPE stoa_leases_revoked_total counter\n"
    << "stoa_leases_revoked_total{cause=\"hoarded\"} " << cm["leases_revoked"] << "\n"
    << "stoa_leases_revoked_total{cause=\"preempted\"} " << cm["leases_preempted"] << "\n";
  gauge("workers_hoarding", "Workers whose lease was revoked, none accepted since",
        cm["workers_hoarding"]);
  gauge("verification_enabled", "1 when rollouts are sampled for replay verification",
        st["verification"]["enabled"].get<bool>() ? 1.0 : 0.0);
  gauge("workers", "Workers known to the hub (idle ones expire)", cm["workers"]);
  gauge("workers_expired_total", "Workers forgotten after no heartbeat", cm["workers_expired"],
        "counter");
  gauge("rate_limited_total", "Requests answered 429 (rate limits)", cm["rate_limited"], "counter");
  gauge("resume_refused_total", "Resumes refused for want of the worker secret",
        cm["resume_refused"], "counter");
  gauge("ledger_writes_total", "Ledger writes committed", cm["ledger_writes"], "counter");
  gauge("ledger_commits_total", "Ledger transactions (one fsync each; group commit)",
        cm["ledger_commits"], "counter");
  gauge("ledger_writes_pending", "Ledger writes queued for the group commit",
        cm["ledger_writes_pending"]);
  o << "# HELP stoa_rollouts_total Rollouts submitted, by intake result\n"
       "# TYPE stoa_rollouts_total counter\n";
  o << "stoa_rollouts_total{status=\"accepted\"} " << cm["rollouts_accepted"] << "\n";
  o << "stoa_rollouts_total{status=\"duplicate\"} " << cm["rollouts_duplicate"] << "\n";
  o << "# HELP stoa_rollouts_rejected_total Rejected rollouts by reason\n"
       "# TYPE stoa_rollouts_rejected_total counter\n";
  for (const auto& [k, v] : cm) {
    if (k.rfind("rollouts_rejected_", 0) == 0) {
      o << "stoa_rollouts_rejected_total{reason=\"" << label(k.substr(18)) << "\"} " << v << "\n";
    }
  }
  o << "# HELP stoa_groups_total Groups by outcome\n# TYPE stoa_groups_total counter\n";
  o << "stoa_groups_total{outcome=\"trained\"} " << cm["groups_trained"] << "\n";
  for (const auto& [k, v] : cm) {
    if (k.rfind("groups_dropped_", 0) == 0) {
      o << "stoa_groups_total{outcome=\"dropped\",reason=\"" << label(k.substr(15)) << "\"} " << v
        << "\n";
    }
  }
  gauge("reward_mean_accepted", "Mean hub-computed reward of accepted rollouts",
        cm["reward_mean_accepted"]);
  gauge("tokens_accepted_total", "Tokens in accepted rollouts", cm["tokens_accepted"], "counter");
  // No learning signal (observe/learning_signal.h): alert on stoa_no_learning_signal == 1.
  gauge("groups_uniform_total",
        "Groups trained whose rollouts all earned the same reward (zero advantage)",
        cm["groups_uniform"], "counter");
  gauge("steps_without_signal_total",
        "Trainer steps with no learning signal (every group uniform, or a zero gradient)",
        cm["steps_without_signal"], "counter");
  gauge("steps_without_signal_consecutive",
        "Trainer steps without learning signal in a row, up to the last one",
        cm["steps_without_signal_consecutive"]);
  gauge("no_learning_signal",
        "1 when the last [trainer] no_signal_warn_steps steps all had no learning signal",
        st["learning_signal"].contains("warning") ? 1.0 : 0.0);
  // Staleness at intake as a cumulative histogram (le = versions behind the latest).
  o << "# HELP stoa_rollout_staleness_versions Latest version minus the rollout's oldest token "
       "version, at intake\n# TYPE stoa_rollout_staleness_versions histogram\n";
  double cum = 0;
  const auto& h = st["staleness_histogram"];
  double sum = 0;
  for (size_t b = 0; b < h.size(); ++b) {
    double n = h[b].get<double>();
    cum += n;
    sum += n * static_cast<double>(b);
    if (b + 1 < h.size()) {
      o << "stoa_rollout_staleness_versions_bucket{le=\"" << b << "\"} " << cum << "\n";
    }
  }
  o << "stoa_rollout_staleness_versions_bucket{le=\"+Inf\"} " << cum << "\n";
  o << "stoa_rollout_staleness_versions_sum " << sum << "\n";
  o << "stoa_rollout_staleness_versions_count " << cum << "\n";
  {
    // Step durations of this process's lifetime (the ledger keeps every step's report).
    const std::vector<int64_t>& buckets = snap.counters.step_seconds_buckets;
    const double step_sum = snap.counters.step_seconds_sum;
    o << "# HELP stoa_step_seconds_histogram Trainer step durations\n"
         "# TYPE stoa_step_seconds_histogram histogram\n";
    int64_t cum_steps = 0;
    for (size_t b = 0; b < buckets.size(); ++b) {
      cum_steps += buckets[b];
      o << "stoa_step_seconds_histogram_bucket{le=\"";
      if (b + 1 < buckets.size())
        o << HubCounters::kStepBounds[b];
      else
        o << "+Inf";
      o << "\"} " << cum_steps << "\n";
    }
    o << "stoa_step_seconds_histogram_sum " << step_sum << "\n";
    o << "stoa_step_seconds_histogram_count " << cum_steps << "\n";
  }
  if (st.contains("last_step")) {
    const auto& s = st["last_step"];
    gauge("step_seconds", "Duration of the last trainer step", s["step_seconds"].get<double>());
    gauge("trainer_busy_fraction", "Trainer busy fraction (last step)",
          s["busy_fraction"].get<double>());
    gauge("dppo_masked_fraction", "Fraction of tokens masked by the DPPO trust region",
          s["masked_fraction"].get<double>());
    gauge("policy_tv", "Mean total variation between behaviour and current policy",
          s["tv"].get<double>());
    gauge("policy_kl", "Mean KL between behaviour and current policy", s["kl"].get<double>());
    gauge("train_reward_mean", "Mean reward of the last step's rollouts",
          s["reward_mean"].get<double>());
    gauge("train_loss", "Loss of the last step", s["loss"].get<double>());
    if (s.contains("extra")) {
      for (const auto& [k, v] : s["extra"].items()) {
        std::string name = "train_";
        for (char c : k) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
        gauge(name, "Trainer-reported " + k, v.get<double>());
      }
    }
  }
  // A family with one sample per worker that reports `field`.
  auto per_worker = [&](const char* metric, const char* type, const char* help, const char* field) {
    o << "# HELP " << metric << " " << help << "\n# TYPE " << metric << " " << type << "\n";
    for (const auto& w : st["workers"]) {
      if (!w.contains(field)) continue;
      o << metric << "{worker=\"" << worker_labels(w) << "\"} " << w[field].get<double>() << "\n";
    }
  };
  per_worker("stoa_worker_tokens_per_second", "gauge",
             "Generation throughput reported by each worker", "tokens_per_s");
  per_worker("stoa_worker_idle_fraction", "gauge",
             "Share of time each worker had nothing to generate", "idle_fraction");
  per_worker("stoa_worker_rollouts_accepted_total", "counter", "Rollouts accepted from each worker",
             "rollouts_accepted");
  per_worker("stoa_worker_patch_lag_versions", "gauge", "Latest version minus the worker's version",
             "patch_lag");
  o << verification_metrics(snap);
  return o.str();
}

}  // namespace stoa::hub
