// Issue 32's measure in simulated time: 50 Sybil workers that lease all they can, heartbeat
// their leases and never submit, against one honest worker that submits its group a fixed
// generation time after each lease. A real Hub (ledger, intake, trainer port) on an injected
// clock, driven in 100 ms ticks; the honest worker's throughput with the Sybils must stay at
// >= 80 % of its throughput alone, and the hoarded leases must be revoked. The same over real
// HTTP: `stoa bench hub --hoarders 50` (docs/design/hub.md "Fair leasing").
#include <cstdio>

#include "roles/hub/hub_fixture.h"

namespace stoa::hub::testing {
namespace {

constexpr int64_t kTickMs = 100;
constexpr int64_t kGenerateMs = 1000;   // the honest worker's generation time per group
constexpr int64_t kHeartbeatMs = 3000;  // under the fixture's 10 s lease TTL

class Hoarding : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    config.group_size = 4;
    config.max_open_groups = 16;  // the default
    config.max_staleness = 1000;
    // The hoarding deadline: 2 s grace + 2 turns × 10 tokens at 10 tokens/s = 4 s, four honest
    // generation times.
    config.sampling.max_new_tokens = 10;
    config.hoard_grace_ms = 2000;
    config.hoard_min_tokens_per_s = 10;
    // The rate limits run on the real clock, which barely moves here.
    config.limits.lease_per_worker = {1e9, 1e9};
  }

  struct Result {
    double honest_per_s = 0;  // accepted rollouts per simulated second, measured phase
    double revoked = 0;
    double preempted = 0;
    double opened_for_waiting = 0;
    int64_t slow_accepted = 0;  // the slow honest worker's, over the whole run
    std::string slow_standing;
  };
  // Where the Sybils ask from: 0 addresses, in-process (no address cap); else spread over
  // `addresses` IPv4 addresses, the honest workers on addresses of their own.
  int addresses = 0;
  int64_t heartbeat_ms = kHeartbeatMs;
  // A second honest worker this many times slower than the first (0: none), from t = 1 s.
  int64_t slow_factor = 0;

  // `hoarders` Sybils join at t = 0, the honest worker at t = 1 s; measured from warm_ms on.
  Result simulate(int hoarders, int64_t warm_ms, int64_t measure_ms) {
    open_hub();
    publish(1);
    auto sybil_peer = [&](size_t i) {
      return addresses > 0 ? "10.0.0." + std::to_string(i % static_cast<size_t>(addresses) + 1)
                           : std::string();
    };
    const std::string honest_peer = addresses > 0 ? "10.1.0.1" : "";
    const std::string slow_peer = addresses > 0 ? "10.1.0.2" : "";
    std::string slow;
    std::optional<net::Lease> slow_held;
    int64_t slow_leased_at = 0, slow_next_ask = 0, slow_accepted = 0;
    struct Sybil {
      std::string id;
      std::vector<std::string> leases;
      int64_t next_ask = 0;
      int64_t next_beat = 0;
    };
    std::vector<Sybil> sybils;
    for (int i = 0; i < hoarders; ++i)
      sybils.push_back({join("sybil-" + std::to_string(i)), {}, 0, 0});
    const int64_t t0 = clock.load();
    std::string honest;
    std::optional<net::Lease> held;
    int64_t leased_at = 0, next_ask = 0, accepted = 0, step = 0;
    for (int64_t t = 0; t < warm_ms + measure_ms; t += kTickMs) {
      clock = t0 + t;
      if (honest.empty() && t >= 1000) honest = join("honest");
      if (!honest.empty()) {
        if (held && t - leased_at >= kGenerateMs) {
          for (int s = 0; s < held->samples; ++s) {
            const auto r =
                hub->submit(honest, rollout(honest, *held, "<answer>migraine</answer>", 1));
            if (r.status == net::IntakeStatus::kAccepted && t >= warm_ms) ++accepted;
          }
          held.reset();
        }
        if (!held && t >= next_ask) {
          const auto r = hub->lease(honest, honest_peer);
          if (r.lease) {
            held = r.lease;
            leased_at = t;
          } else {
            next_ask = t + r.retry_after_ms;
          }
        }
      }
      if (slow_factor > 0 && slow.empty() && t >= 1000) slow = join("slow");
      if (!slow.empty()) {
        if (slow_held && t - slow_leased_at >= kGenerateMs * slow_factor) {
          for (int k = 0; k < slow_held->samples; ++k)
            slow_accepted +=
                hub->submit(slow, rollout(slow, *slow_held, "<answer>x</answer>", 1)).status ==
                net::IntakeStatus::kAccepted;
          slow_held.reset();
        }
        if (!slow_held && t >= slow_next_ask) {
          const auto r = hub->lease(slow, slow_peer);
          if (r.lease) {
            slow_held = r.lease;
            slow_leased_at = t;
          } else {
            slow_next_ask = t + r.retry_after_ms;
          }
        }
      }
      for (size_t i = 0; i < sybils.size(); ++i) {
        auto& s = sybils[i];
        if (t >= s.next_ask) {
          const auto r = hub->lease(s.id, sybil_peer(i));
          if (r.lease)
            s.leases.push_back(r.lease->lease_id);
          else
            s.next_ask = t + r.retry_after_ms;
        }
        if (t >= s.next_beat) {
          net::Heartbeat hb;
          hb.worker_id = s.id;
          hb.leases = s.leases;
          for (const auto& gone : hub->heartbeat(s.id, hb).cancelled) std::erase(s.leases, gone);
          s.next_beat = t + heartbeat_ms;
        }
      }
      // The trainer keeps up.
      std::vector<std::string> ids;
      for (const auto& g : hub->take_groups(64, std::chrono::milliseconds(0)))
        ids.push_back(g.group_id);
      if (!ids.empty()) {
        StepReport rep;
        rep.step = ++step;
        hub->mark_trained(ids, rep);
      }
    }
    auto c = hub->counters();
    Result out{static_cast<double>(accepted) / (static_cast<double>(measure_ms) / 1000.0),
               c["leases_revoked"],
               c["leases_preempted"],
               c["groups_opened_for_waiting"],
               slow_accepted,
               ""};
    const nlohmann::json status = hub->status();
    for (const auto& w : status["workers"])
      if (w["id"] == slow) out.slow_standing = w["standing"].get<std::string>();
    return out;
  }
};

TEST_F(Hoarding, AnHonestWorkerKeepsItsThroughputAgainst50HoardingSybils) {
  const Result alone = simulate(0, 5'000, 20'000);
  TearDown();
  SetUp();
  const Result crowded = simulate(50, 20'000, 20'000);
  const double ratio = crowded.honest_per_s / alone.honest_per_s;
  std::printf(
      "hoarding: honest worker alone %.2f rollouts/s, with 50 hoarding Sybils %.2f rollouts/s "
      "(%.1f %%); leases revoked %.0f, preempted %.0f\n",
      alone.honest_per_s, crowded.honest_per_s, 100 * ratio, crowded.revoked, crowded.preempted);
  EXPECT_GT(alone.honest_per_s, 3.0) << "G = 4 rollouts per ~1 s generation";
  EXPECT_GE(ratio, 0.8);
  EXPECT_GE(crowded.revoked, 50) << "every Sybil held a lease past the deadline at least once";
}

TEST_F(Hoarding, WithoutRevocationTheSybilsStarveTheHonestWorker) {
  // The control: the same crowd with the hoarding deadline off (and no caps) — what issue 32
  // found. If this passed with fair leasing off, the test above would prove nothing.
  config.hoard_min_tokens_per_s = 0;
  config.lease_caps = {0, 0, 0};
  config.waiting_worker_groups = 0;
  const Result crowded = simulate(50, 30'000, 10'000);
  std::printf("hoarding, fair leasing off: honest worker %.2f rollouts/s\n", crowded.honest_per_s);
  EXPECT_LT(crowded.honest_per_s, 0.5);
}

// Issue 51: the same crowd with every hub setting at its default (the 1144 s hoarding deadline
// of the default sampling, 16 open groups, caps 4 / 8, heartbeats every 10 s), the Sybils on 1,
// 2, 8 and 50 addresses, and measured from the honest worker's join: nothing is revoked within
// the run, so only groups opened beyond max_open_groups for a worker holding none keep it
// working. A second honest worker at a tenth of its speed is not revoked and keeps working.
class HoardingAtTheDefaults : public Hoarding {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    const std::string ledger = config.ledger_path, token = config.join_token;
    config = HubConfig{};
    config.ledger_path = ledger;
    config.join_token = token;
    // The rate limits run on the real clock, which barely moves here.
    config.limits.lease_per_worker = {1e9, 1e9};
    config.limits.lease_per_ip = {1e9, 1e9};
    heartbeat_ms = 1000LL * config.heartbeat_interval_s;
  }
};

TEST_F(HoardingAtTheDefaults, AnHonestWorkerKeepsItsThroughputAmong50SybilsOn1To50Addresses) {
  addresses = 1;
  const Result alone = simulate(0, 1'000, 60'000);
  EXPECT_GT(alone.honest_per_s, 3.0);
  for (int n : {1, 2, 8, 50}) {
    TearDown();
    SetUp();
    addresses = n;
    slow_factor = 10;
    const Result crowded = simulate(50, 1'000, 60'000);
    const double ratio = crowded.honest_per_s / alone.honest_per_s;
    std::printf(
        "hoarding at the defaults, Sybils on %d address(es): honest %.2f rollouts/s alone, %.2f "
        "among 50 Sybils (%.1f %%), measured from its join; groups opened for waiting workers "
        "%.0f, leases revoked %.0f; slow worker (1/10 speed) %lld rollouts accepted, standing "
        "%s\n",
        n, alone.honest_per_s, crowded.honest_per_s, 100 * ratio, crowded.opened_for_waiting,
        crowded.revoked, static_cast<long long>(crowded.slow_accepted),
        crowded.slow_standing.c_str());
    EXPECT_GE(ratio, 0.8) << n << " addresses";
    EXPECT_GT(crowded.slow_accepted, 0) << n << " addresses";
    EXPECT_EQ(crowded.slow_standing, "proven") << n << " addresses: never revoked";
  }
}

}  // namespace
}  // namespace stoa::hub::testing
