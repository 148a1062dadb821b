// One rule for what a rollout may be (env/rollout_rule.h), tried with real processes as a hostile
// worker would: a `stoa run` (hub + trainer) and a scripted client speaking the wire protocol.
//  - Rollouts the trainer refuses (a top-K row that repeats an id, one whose probabilities sum
//    above 1, a K other than the run's) are refused at the hub's door with the rule's reason;
//    the run goes on and trains.
//  - Groups already in the ledger that the trainer cannot train on (accepted under a run config
//    that asked for top-2 log-probs; the run restarted asking for none) are dropped by the
//    trainer, durably, and the run steps on; after a kill -9 and a restart they are never handed
//    to the trainer again.
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "integration/cluster.h"
#include "net/hub_client.h"
#include "net/protocol.h"

namespace stoa::integration {
namespace {

// What a rollout's top-K rows look like: honest (the sampled token and its neighbour, a part of
// a distribution) or one of the forgeries the trainer refuses.
enum class TopkRows { kHonest, kRepeatedId, kMassAboveOne };

class HostileClient {
 public:
  explicit HostileClient(const std::string& url) : hub_(url, options()) {
    net::JoinRequest j;
    j.name = "hostile";
    hub_.join(Cluster::kToken, j);
  }

  // Leases a group (waiting up to 30 s for one).
  net::Lease lease() {
    for (int i = 0; i < 300; ++i) {
      auto lr = hub_.lease();
      if (lr.lease) return *lr.lease;
      std::this_thread::sleep_for(100ms);
    }
    throw std::runtime_error("no lease in 30 s");
  }

  // A rollout of `lease`: its prompt, then 4 "generated" tokens at the latest version, with top-K
  // rows of `k` entries shaped as `rows` says.
  net::RolloutSubmission rollout(const net::Lease& lease, int sample, int32_t k, TopkRows rows) {
    const uint64_t version = hub_.version(std::nullopt, 0s).version.value_or(0);
    net::RolloutSubmission r;
    r.id = net::random_uuid();
    r.worker_id = hub_.worker_id();
    r.lease_id = lease.lease_id;
    r.group_id = lease.group_id;
    r.prompt_id = lease.prompt_id;
    r.tokens = lease.prompt_tokens;
    r.mask.assign(r.tokens.size(), 0);
    for (int t = 0; t < 4; ++t) {
      r.tokens.push_back(lease.prompt_tokens[static_cast<size_t>(t)]);
      r.mask.push_back(1);
    }
    const size_t n = r.tokens.size();
    r.logprobs.assign(n, 0.0f);
    r.versions.assign(n, 0);
    r.topk = k;
    r.topk_ids.assign(n * static_cast<size_t>(k), 0);
    r.topk_logprobs.assign(n * static_cast<size_t>(k), -1.0f);
    for (size_t t = 0; t < n; ++t) {
      if (!r.mask[t]) continue;
      r.logprobs[t] = -1.0f - static_cast<float>(sample);
      r.versions[t] = version;
      for (int32_t j = 0; j < k; ++j) {
        const size_t at = t * static_cast<size_t>(k) + static_cast<size_t>(j);
        r.topk_ids[at] = j == 0 ? r.tokens[t] : (r.tokens[t] + j) % 512;
        r.topk_logprobs[at] = -1.0f - static_cast<float>(j);
      }
      if (rows == TopkRows::kRepeatedId) r.topk_ids[t * static_cast<size_t>(k) + 1] = r.tokens[t];
      if (rows == TopkRows::kMassAboveOne) {
        for (int32_t j = 0; j < k; ++j) r.topk_logprobs[t * static_cast<size_t>(k) + j] = -0.05f;
      }
    }
    r.turns = 1;
    return r;
  }

  net::RolloutResponse submit(const net::RolloutSubmission& r) { return hub_.submit(r); }

  // Leases a group and completes it with honest rollouts reporting top-`k`; its group id.
  std::string complete_group(int32_t k) {
    const net::Lease l = lease();
    for (int s = 0; s < l.samples; ++s) {
      auto resp = submit(rollout(l, s, k, TopkRows::kHonest));
      if (resp.status != net::IntakeStatus::kAccepted)
        throw std::runtime_error("honest rollout refused: " + resp.reason + " " + resp.detail);
    }
    return l.group_id;
  }

 private:
  static net::HttpClientOptions options() {
    net::HttpClientOptions o;
    o.max_attempts = 3;
    o.backoff_base = 50ms;
    o.backoff_max = 500ms;
    o.connect_timeout = 1000ms;
    return o;
  }
  net::HubClient hub_;
};

RunSpec spec_with(int32_t topk, int groups_per_step, int gather_timeout_ms) {
  RunSpec spec;
  spec.port = free_port();  // restarts keep the URL
  spec.group_size = 2;
  spec.groups_per_step = groups_per_step;
  spec.gather_timeout_ms = gather_timeout_ms;
  spec.adjust = [topk](run::RunConfig& c) { c.hub.topk = topk; };
  return spec;
}

TEST(HostileRollout, WhatTheTrainerRefusesIsRefusedAtTheDoorAndTheRunTrains) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  Cluster c("hostile-door", spec_with(/*topk=*/2, /*groups_per_step=*/1, 500));
  HostileClient client(c.start_hub());
  const net::Lease l = client.lease();
  const struct {
    int32_t k;
    TopkRows rows;
    const char* reason;
  } forgeries[] = {{2, TopkRows::kRepeatedId, "bad_topk"},
                   {2, TopkRows::kMassAboveOne, "bad_topk"},
                   {3, TopkRows::kHonest, "topk_mismatch"},
                   {0, TopkRows::kHonest, "topk_mismatch"}};
  for (const auto& f : forgeries) {
    auto resp = client.submit(client.rollout(l, 0, f.k, f.rows));
    EXPECT_EQ(resp.status, net::IntakeStatus::kRejected) << f.reason;
    EXPECT_EQ(resp.reason, f.reason) << resp.detail;
  }
  // The lease's group completed honestly, and two more: the trainer steps on them.
  for (int s = 0; s < l.samples; ++s) {
    auto resp = client.submit(client.rollout(l, s, 2, TopkRows::kHonest));
    ASSERT_EQ(resp.status, net::IntakeStatus::kAccepted) << resp.reason << " " << resp.detail;
  }
  client.complete_group(2);
  ASSERT_TRUE(wait_until([&] { return c.step() >= 2; }, 120s)) << c.logs();
  EXPECT_TRUE(c.hub().running()) << c.logs();
  EXPECT_EQ(c.counter("rollouts_rejected"), 4);
  c.stop_all();
}

TEST(HostileRollout, GroupsTheTrainerCannotTrainAreDroppedOnceAndTheRunGoesOn) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  // Run 1 asks for top-2 log-probs and gathers for minutes: two complete groups wait in the
  // ledger, untrained.
  const RunSpec first = spec_with(/*topk=*/2, /*groups_per_step=*/8, /*gather_timeout_ms=*/600000);
  Cluster c("hostile-ledger", first);
  std::set<std::string> refused;
  {
    HostileClient client(c.start_hub());
    refused.insert(client.complete_group(2));
    refused.insert(client.complete_group(2));
  }
  EXPECT_EQ(c.step(), 0);
  c.kill_hub();

  // Run 2, same run directory, asks for none: the trainer cannot train those groups.
  const fs::path toml = c.dir() / "run.toml";
  run::RunConfig config = run::load_run_config(toml.string());
  config.hub.topk = 0;
  config.loop.groups_per_step = 1;
  config.loop.gather_timeout = 500ms;
  run::save_run_config(config, toml.string());
  HostileClient client(c.start_hub());
  ASSERT_TRUE(wait_until(
      [&] {
        auto view = read_ledger(c.ledger_path());
        for (const auto& g : refused)
          if (view.group_status[g] != "dropped") return false;
        return true;
      },
      60s))
      << c.logs();
  EXPECT_TRUE(c.hub().running()) << c.logs();
  EXPECT_EQ(c.counter("groups_dropped_invalid_rollout"), 2);
  EXPECT_NE(c.hub().err().find("invalid_rollout"), std::string::npos) << c.hub().err();
  // The run goes on: an honest group (no top-K now) is trained.
  const std::string honest = client.complete_group(0);
  ASSERT_TRUE(wait_until([&] { return c.step() >= 1; }, 120s)) << c.logs();

  // kill -9 and restart: the dropped groups stay dropped and are never handed out again.
  c.kill_hub();
  HostileClient again(c.start_hub());
  again.complete_group(0);
  ASSERT_TRUE(wait_until([&] { return c.step() >= 2; }, 120s)) << c.logs();
  const std::string restarted_log = c.hub().err();
  EXPECT_EQ(restarted_log.find("invalid_rollout"), std::string::npos) << restarted_log;
  auto view = read_ledger(c.ledger_path());
  for (const auto& g : refused) {
    EXPECT_EQ(view.group_status[g], "dropped") << g;
    for (const auto& trained : view.step_group_ids) EXPECT_NE(trained, g);
  }
  EXPECT_EQ(view.group_status[honest], "trained");
  c.stop_all();
}

}  // namespace
}  // namespace stoa::integration
