#include "bench/sybil_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "bench/bench_task.h"
#include "core/log.h"
#include "core/rng.h"
#include "net/protocol.h"
#include "roles/hub/hub.h"
#include "roles/worker/rollout_record.h"

namespace stoa::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The hub's trusted replay, answered with the truth after a queue bounded like the hub's.
class TruthAuditor final : public hub::RolloutAuditor {
 public:
  explicit TruthAuditor(size_t max_queue) : max_queue_(max_queue) {}
  bool enqueue(hub::AuditJob job) override {
    if (queue_.size() >= max_queue_) return false;
    queue_.push_back(std::move(job.rollout.id));
    return true;
  }
  std::deque<std::string>& queue() { return queue_; }

 private:
  size_t max_queue_;
  std::deque<std::string> queue_;
};

// Every simulated token's log-prob (the content is not what is simulated; forgery is by fiat).
constexpr float kLogprob = -0.5f;

struct SimWorker {
  std::string id;
  std::string address;
  bool attacker = false;
  bool lazy = false;  // an honest author that passes every check unreplayed
  int64_t groups = 0;
  std::optional<net::Lease> lease;
  int64_t ready_s = 0;
  std::vector<hub::CheckLease> checks;  // leased last second, answered this one
};

json run_one(const SybilSimOptions& o, double f, double audit, const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  BenchTask world(dir, 64);
  const env::ByteCodec& codec = world.codec();
  int64_t clock_ms = 1'000'000;
  hub::HubConfig config;
  config.ledger_path = (dir / "ledger.sqlite").string();
  config.join_token = "sim";
  config.group_size = 4;
  config.max_staleness = 1'000'000;  // the staleness policy is not what is simulated
  config.max_open_groups = static_cast<size_t>(o.workers) * 2;
  config.max_queued_groups = static_cast<size_t>(o.workers) * 8;
  // The hub's rate limits run on the real (steady) clock, which the simulated one outpaces by
  // far: left on, they would throttle the simulated fleet by how fast this machine runs the
  // simulation, and the results would depend on it.
  for (hub::RateLimit* limit : {&config.limits.join_per_ip, &config.limits.lease_per_worker,
                                &config.limits.lease_per_ip, &config.limits.rollouts_per_worker,
                                &config.limits.rollouts_per_ip, &config.limits.task_per_worker})
    *limit = hub::RateLimit{};
  config.verify.enabled = true;
  config.verify.peer = true;
  config.verify.audit_fraction = audit;
  config.verify.first_rollouts = o.first_rollouts;
  config.verify.check_share = o.check_share;
  config.verify.check_allowance = o.check_allowance;
  config.verify.canary_fraction = o.canary_fraction;
  config.verify.max_wait_ms = 3'600'000;
  config.seed = o.seed;
  hub::HubDeps deps = world.deps();
  deps.clock_ms = [&clock_ms] { return clock_ms; };
  hub::Hub hub(config, deps);
  TruthAuditor truth(config.verify.max_queue);
  hub.checks().set_auditor(&truth);
  pulse::Published published;
  published.version = 1;
  hub.publish_version(published, Hash128{1, 1});

  Rng rng(o.seed, static_cast<uint64_t>(f * 1000) + 7);
  const int attackers = static_cast<int>(std::lround(f * o.workers));
  const int lazy = static_cast<int>(std::lround(o.lazy_fraction * (o.workers - attackers)));
  std::vector<SimWorker> fleet(static_cast<size_t>(o.workers));
  for (int i = 0; i < o.workers; ++i) {
    SimWorker& w = fleet[static_cast<size_t>(i)];
    w.attacker = i < attackers;
    w.lazy = !w.attacker && i < attackers + lazy;
    w.address = "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1);
    net::JoinRequest r;
    r.name = (w.attacker ? "sybil-" : "honest-") + std::to_string(i);
    w.id = hub.join("sim", r, w.address).worker_id;
  }
  // Forged rollouts by id (what the hub's trusted replay, which sees the submission, judges)
  // and by seed (what the attacker's checkers recognise in a blinded job).
  std::set<std::string> forged;
  std::set<uint64_t> forged_seeds;
  // The attacker forges once its first rollouts (the hub's own replay) are behind it.
  const int64_t honest_groups = (o.first_rollouts + config.group_size - 1) / config.group_size;
  int64_t submitted = 0, forged_submitted = 0, forged_trained = 0, honest_trained = 0,
          peer_checks = 0, trusted_replays = 0, step = 0, identities_burned = 0;
  std::vector<size_t> order(fleet.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (int s = 0; s < o.seconds; ++s) {
    rng.shuffle(order);
    for (size_t i : order) {
      SimWorker& w = fleet[i];
      if (hub.checks().quarantined(w.id)) {
        if (!w.attacker) continue;
        // A public join token makes identities free: the attacker comes back as a new worker
        // (from a new address), which must earn its standing again.
        ++identities_burned;
        w.address = "10.1." + std::to_string(identities_burned / 250) + "." +
                    std::to_string(identities_burned % 250 + 1);
        net::JoinRequest r;
        r.name = "sybil-again";
        w.id = hub.join("sim", r, w.address).worker_id;
        w.groups = 0;
        w.lease.reset();
        w.checks.clear();
      }
      try {
        if (w.lease && s >= w.ready_s) {
          const bool forge = w.attacker && w.groups >= honest_groups;
          for (int32_t k = 0; k < w.lease->samples; ++k) {
            worker::RolloutRecord record(*w.lease, w.id);
            record.set_replay_info(w.lease->seeds.at(static_cast<size_t>(k)), "sim", 1);
            for (int32_t t : codec.encode("<answer>migraine</answer>"))
              record.add_generated(t, kLogprob, 1);
            record.set_answer("<answer>migraine</answer>");
            const net::RolloutSubmission m = record.finish();
            if (hub.submit(w.id, m, w.address).status != net::IntakeStatus::kAccepted) continue;
            ++submitted;
            if (forge && k < o.forged_per_group) {
              forged.insert(m.id);
              forged_seeds.insert(*m.seed);
              ++forged_submitted;
            }
          }
          ++w.groups;
          w.lease.reset();
        }
        if (!w.lease) {
          if (auto l = hub.lease(w.id, w.address).lease) {
            w.lease = *l;
            w.ready_s = s + o.group_seconds;
          }
        }
        if (s % 10 == static_cast<int>(i % 10)) {
          net::Heartbeat hb;
          hb.worker_id = w.id;
          if (w.lease) hb.leases = {w.lease->lease_id};
          hub.heartbeat(w.id, hb);
        }
        // Checks leased last second are answered now; then up to checks_per_s more.
        for (const auto& check : w.checks) {
          // What an exact replay finds: a forged rollout, or a canary (the hub nudged a
          // log-prob; the simulated rollouts all carry kLogprob).
          const auto& r = check.job.rollout;
          bool nudged = false;
          for (size_t p = 0; p < r.logprobs.size(); ++p)
            nudged |= r.mask[p] && r.logprobs[p] != kLogprob;
          const bool team_forgery = r.seed && forged_seeds.count(*r.seed);
          const bool truth_pass = !nudged && !team_forgery;
          const bool ours = !nudged && team_forgery;
          hub::AuditVerdict v;
          if (w.lazy)
            v.pass = true;
          else if (w.attacker)
            v.pass = truth_pass || ours;
          else
            v.pass = truth_pass;
          if (!v.pass) v.what = "logprob";
          ++peer_checks;
          try {
            hub.checks().record_check(w.id, check.job_id, v);
          } catch (const hub::RequestError&) {
            // closed meanwhile (its group dropped): the verdict is not needed
          }
        }
        w.checks.clear();
        for (int k = 0; k < o.checks_per_s; ++k) {
          auto l = hub.checks().lease_check(w.id, w.address);
          if (!l) break;
          w.checks.push_back(std::move(*l));
        }
      } catch (const hub::RequestError&) {
        // a refused session or a rate limit: the worker goes on next second
      }
    }
    for (int k = 0; k < o.hub_replays_per_s && !truth.queue().empty(); ++k) {
      const std::string id = truth.queue().front();
      truth.queue().pop_front();
      hub::AuditVerdict v;
      v.pass = !forged.count(id);
      if (!v.pass) v.what = "logprob";
      hub.checks().record_verdict(id, v);
      ++trusted_replays;
    }
    const auto groups = hub.take_groups(100000, std::chrono::milliseconds(0));
    std::vector<std::string> ids;
    for (const auto& g : groups) {
      ids.push_back(g.group_id);
      for (const auto& r : g.rollouts) ++(forged.count(r.id) ? forged_trained : honest_trained);
    }
    if (!ids.empty()) {
      hub::StepReport report;
      report.step = ++step;
      report.groups = static_cast<int64_t>(ids.size());
      hub.mark_trained(ids, report);
    }
    clock_ms += 1000;
  }
  int64_t honest_quarantined = 0, lazy_quarantined = 0;
  for (const auto& w : fleet) {
    honest_quarantined += !w.attacker && !w.lazy && hub.checks().quarantined(w.id);
    lazy_quarantined += w.lazy && hub.checks().quarantined(w.id);
  }
  const auto c = hub.counters();
  auto counter = [&c](const char* k) { return c.count(k) ? c.at(k) : 0.0; };
  const double accepted = std::max<double>(1, static_cast<double>(submitted));
  json escalated_by_why = json::object();  // disagreement, audit, unclaimed, check_timeout, ...
  const std::string prefix = "checks_escalated_";
  for (const auto& [name, value] : c)
    if (name.rfind(prefix, 0) == 0) escalated_by_why[name.substr(prefix.size())] = value;
  // Per forged rollout with one checker and audits: trained only when its checker is the
  // attacker's (share of checks ~ f) and the pass is not audited.
  return {{"attacker_fraction", f},
          {"attackers", attackers},
          {"audit_fraction", audit},
          {"rollouts_accepted", submitted},
          {"rollouts_trained_honest", honest_trained},
          {"forged_submitted", forged_submitted},
          {"forged_trained", forged_trained},
          {"forged_trained_fraction",
           forged_submitted ? static_cast<double>(forged_trained) / forged_submitted : 0.0},
          {"analytic_per_forged_rollout", f * (1 - audit)},
          {"attacker_identities_quarantined", identities_burned},
          {"honest_quarantined", honest_quarantined},
          {"lazy_checkers", lazy},
          {"lazy_quarantined", lazy_quarantined},
          {"canary_checks", counter("canary_checks_leased")},
          {"canary_checks_passed", counter("canary_checks_passed")},
          {"checkers_quarantined", counter("checkers_quarantined")},
          {"peer_checks_per_rollout", static_cast<double>(peer_checks) / accepted},
          {"hub_replays_per_rollout", static_cast<double>(trusted_replays) / accepted},
          {"replays_per_rollout", static_cast<double>(peer_checks + trusted_replays) / accepted},
          {"escalated", counter("checks_escalated")},
          {"escalated_by_why", escalated_by_why},
          {"groups_dropped_unchecked", counter("groups_dropped_unchecked")}};
}

}  // namespace

json run_sybil_sim(const SybilSimOptions& o) {
  const fs::path dir =
      fs::temp_directory_path() / ("stoa_sybil_sim_" + net::random_token().substr(0, 10));
  json runs = json::array();
  for (double audit : o.audit_fractions)
    for (double f : o.attacker_fractions) runs.push_back(run_one(o, f, audit, dir));
  std::error_code ec;
  fs::remove_all(dir, ec);
  return {{"bench", "sybil"},
          {"workers", o.workers},
          {"simulated_seconds", o.seconds},
          {"group_seconds", o.group_seconds},
          {"checks_per_s", o.checks_per_s},
          {"forged_per_group", o.forged_per_group},
          {"hub_replays_per_s", o.hub_replays_per_s},
          {"first_rollouts", o.first_rollouts},
          {"check_share", o.check_share},
          {"check_allowance", o.check_allowance},
          {"canary_fraction", o.canary_fraction},
          {"lazy_fraction", o.lazy_fraction},
          {"runs", runs}};
}

}  // namespace stoa::bench
