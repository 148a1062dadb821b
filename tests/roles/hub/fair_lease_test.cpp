// Fair leasing through the Hub API (lease_fairness.h, docs/design/hub.md "Fair leasing"): caps
// per worker, address and join token, the waiting order, hoarded leases revoked (and their late
// rollouts refused, with the ledger's exactly-once intact), and hoarders preempted.
#include <algorithm>

#include "net/secret.h"
#include "roles/hub/hub_fixture.h"
#include "roles/hub/leasing/lease_fairness.h"

namespace stoa::hub::testing {
namespace {

class FairLease : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    // A short hoarding deadline: 1 s grace + 2 turns × 10 tokens at 10 tokens/s = 3 s.
    config.sampling.max_new_tokens = 10;
    config.hoard_grace_ms = 1000;
    config.hoard_min_tokens_per_s = 10;
  }
  net::Heartbeat beat(const std::string& worker, std::vector<std::string> leases) {
    net::Heartbeat hb;
    hb.worker_id = worker;
    hb.leases = std::move(leases);
    return hb;
  }
  void complete(const std::string& worker, const net::Lease& l) {
    for (int i = 0; i < l.samples; ++i)
      ASSERT_EQ(hub->submit(worker, rollout(worker, l, "<answer>migraine</answer>", 1)).status,
                net::IntakeStatus::kAccepted);
  }
  nlohmann::json worker_status(const std::string& id) {
    const nlohmann::json status = hub->status(0, 100);
    for (const auto& w : status["workers"])
      if (w["id"] == id) return w;
    return nullptr;
  }
};

TEST_F(FairLease, AWorkerOverItsCapGetsNoWorkNowNotAnError) {
  config.lease_caps.per_worker = 2;
  open_hub();
  publish(1);
  const auto a = join("a"), b = join("b");
  ASSERT_TRUE(hub->lease(a).lease);
  ASSERT_TRUE(hub->lease(a).lease);
  const auto third = hub->lease(a);
  EXPECT_FALSE(third.lease.has_value());
  EXPECT_EQ(third.retry_after_ms, config.no_work_retry_ms);
  EXPECT_EQ(hub->counters()["leases_capped"], 1);
  EXPECT_TRUE(hub->lease(b).lease.has_value()) << "the cap is a's, not the run's";
  EXPECT_EQ(worker_status(a)["leases"], 2);
}

TEST_F(FairLease, LeasesTheWorkerStoppedListingStopCountingAfterTwoHeartbeats) {
  // A worker forgets a lease whose rollouts ended (some refused): the hub's lease stays open
  // until its deadline, but must not hold the worker's cap until then.
  config.lease_caps.per_worker = 1;
  open_hub();
  publish(1);
  const auto a = join("a");
  const auto la = *hub->lease(a).lease;
  EXPECT_FALSE(hub->lease(a).lease);
  hub->heartbeat(a, beat(a, {la.lease_id}));
  hub->heartbeat(a, beat(a, {}));  // may have been built before the lease's answer arrived
  EXPECT_FALSE(hub->lease(a).lease);
  hub->heartbeat(a, beat(a, {}));
  EXPECT_TRUE(hub->lease(a).lease.has_value());
}

TEST_F(FairLease, AddressCapCountsAnIpv6HostBySlash64AndExemptsLoopback) {
  config.lease_caps.per_worker = 0;
  config.lease_caps.per_address = 3;
  config.max_open_groups = 100;
  open_hub();
  publish(1);
  const auto a = join("a"), b = join("b"), c = join("c"), d = join("d");
  ASSERT_TRUE(hub->lease(a, "203.0.113.5").lease);
  ASSERT_TRUE(hub->lease(a, "203.0.113.5").lease);
  ASSERT_TRUE(hub->lease(b, "203.0.113.5").lease);
  EXPECT_FALSE(hub->lease(b, "203.0.113.5").lease) << "a third worker's lease from the address";
  EXPECT_TRUE(hub->lease(c, "203.0.113.6").lease);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(hub->lease(d, "127.0.0.1").lease) << i;
  EXPECT_EQ(address_key("2001:db8::1"), address_key("2001:db8:0:0:ffff::2"));
  EXPECT_NE(address_key("2001:db8::1"), address_key("2001:db8:0:1::1"));
  EXPECT_EQ(address_key("::1"), "");
  EXPECT_EQ(address_key(""), "");
  EXPECT_EQ(address_key("198.51.100.7"), "198.51.100.7");
}

TEST_F(FairLease, JoinTokenCapCountsEveryWorkerOfTheToken) {
  config.lease_caps.per_worker = 0;
  config.lease_caps.per_token = 2;
  config.max_open_groups = 100;
  const std::string team = "team-" + net::random_token();
  {
    Ledger cli(config.ledger_path);  // `stoa hub token add team`
    cli.put_join_token({"team", net::sha256_hex(team), "work", 1, 0});
  }
  open_hub();
  publish(1);
  net::JoinRequest r;
  const auto t1 = hub->join(team, r).worker_id, t2 = hub->join(team, r).worker_id;
  ASSERT_TRUE(hub->lease(t1).lease);
  ASSERT_TRUE(hub->lease(t2).lease);
  EXPECT_FALSE(hub->lease(t2).lease) << "the token 'team' holds its 2";
  EXPECT_FALSE(hub->lease(t1).lease);
  const auto other = join("default-token");
  EXPECT_TRUE(hub->lease(other).lease) << "another token's workers are not capped by 'team'";
}

TEST_F(FairLease, AFreedGroupGoesToTheWorkerThatWaitedNotTheOneThatJustFinished) {
  config.max_open_groups = 2;
  config.waiting_worker_groups = 0;  // the waiting order alone (the next test: groups beyond)
  open_hub();
  publish(1);
  const auto a = join("a"), b = join("b"), c = join("c");
  const auto la = *hub->lease(a).lease;
  ASSERT_TRUE(hub->lease(b).lease);
  EXPECT_FALSE(hub->lease(c).lease) << "both groups are out";
  complete(a, la);  // a group slot frees up
  // a holds nothing now, as c, but c asked first: a waits.
  const auto again = hub->lease(a);
  EXPECT_FALSE(again.lease.has_value());
  EXPECT_EQ(again.retry_after_ms, config.no_work_retry_ms);
  EXPECT_EQ(hub->counters()["leases_deferred"], 1);
  EXPECT_TRUE(hub->lease(c).lease.has_value());
  EXPECT_EQ(hub->counters()["lease_waiters"], 1) << "a still waits";
  // b holds a lease, a none: a ranks first for the next free group.
  EXPECT_FALSE(hub->lease(b).lease);
  EXPECT_EQ(hub->counters()["leases_deferred"], 2);
  EXPECT_EQ(hub->counters()["lease_waiters"], 2);
  // A claim lapses when its worker stops asking (a few retry intervals, under the lease TTL).
  clock += 2001;
  EXPECT_FALSE(hub->lease(b).lease);
  EXPECT_EQ(hub->counters()["lease_waiters"], 1) << "a's claim lapsed, b's is renewed";
  EXPECT_EQ(hub->counters()["leases_deferred"], 2) << "nobody was ahead of b this time";
}

// Issue 51: every group is out and held; a worker holding none gets one opened beyond
// max_open_groups, one at a time, up to waiting_worker_groups; a worker holding one waits.
TEST_F(FairLease, AWorkerHoldingNoneGetsAGroupBeyondMaxOpenGroupsWithinTheBound) {
  config.max_open_groups = 1;
  config.waiting_worker_groups = 1;
  open_hub();
  publish(1);
  const auto a = join("a"), b = join("b"), c = join("c");
  const auto la = *hub->lease(a).lease;
  EXPECT_FALSE(hub->lease(a).lease) << "a holds one: it waits like before";
  const auto lb = hub->lease(b).lease;
  ASSERT_TRUE(lb.has_value()) << "b holds none: a group beyond max_open_groups";
  EXPECT_NE(lb->group_id, la.group_id);
  EXPECT_EQ(hub->counters()["groups_opened_for_waiting"], 1);
  EXPECT_FALSE(hub->lease(c).lease) << "the bound: one group beyond";
  complete(b, *lb);
  EXPECT_TRUE(hub->lease(c).lease.has_value()) << "b's group finished: room again";
}

TEST_F(FairLease, AHoardedLeaseIsRevokedItsGroupReissuedAndItsLateRolloutRefused) {
  open_hub();
  publish(1);
  ASSERT_EQ(hub->hoard_deadline_ms(), 3000);
  const auto h = join("hoarder"), honest = join("honest");
  const auto lh = *hub->lease(h).lease;
  // Heartbeats keep it past the lease TTL's reach, but not past the hoarding deadline.
  clock += 2000;
  EXPECT_EQ(hub->heartbeat(h, beat(h, {lh.lease_id})).renewed.size(), 1u);
  clock += 1001;
  const auto hb = hub->heartbeat(h, beat(h, {lh.lease_id}));
  EXPECT_EQ(hb.cancelled, std::vector<std::string>{lh.lease_id});
  EXPECT_EQ(hub->counters()["leases_revoked"], 1);
  EXPECT_EQ(worker_status(h)["standing"], "hoarder");
  EXPECT_NE(hub->metrics().find("stoa_leases_revoked_total{cause=\"hoarded\"} 1\n"),
            std::string::npos);
  // The group goes to the next worker, whole.
  const auto lo = *hub->lease(honest).lease;
  EXPECT_EQ(lo.group_id, lh.group_id);
  EXPECT_EQ(lo.samples, 2);
  // The hoarder's rollout for the revoked lease is refused, not counted against the group.
  const auto late = hub->submit(h, rollout(h, lh, "<answer>migraine</answer>", 1));
  EXPECT_EQ(late.status, net::IntakeStatus::kRejected);
  EXPECT_EQ(late.reason, "lease_revoked");
  complete(honest, lo);
  EXPECT_EQ(worker_status(honest)["standing"], "proven");
  // Exactly once, across a restart too: one group of the honest worker's two rollouts.
  open_hub();
  const auto groups = hub->take_groups(10, std::chrono::milliseconds(0));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].group_id, lh.group_id);
  ASSERT_EQ(groups[0].rollouts.size(), 2u);
  for (const auto& r : groups[0].rollouts) EXPECT_EQ(r.worker_id, honest);
  EXPECT_EQ(hub->counters()["rollouts_accepted"], 2);
}

TEST_F(FairLease, ALeaseThatProgressesIsKeptEachRolloutRestartsTheDeadline) {
  open_hub();
  publish(1);
  const auto a = join("a");
  const auto la = *hub->lease(a).lease;
  clock += 2500;
  ASSERT_EQ(hub->submit(a, rollout(a, la, "<answer>x</answer>", 1)).status,
            net::IntakeStatus::kAccepted);
  clock += 2500;  // 5 s after issue, 2.5 s after the last rollout
  EXPECT_EQ(hub->heartbeat(a, beat(a, {la.lease_id})).renewed.size(), 1u);
  EXPECT_EQ(hub->counters()["leases_revoked"], 0);
  clock += 600;
  EXPECT_EQ(hub->heartbeat(a, beat(a, {la.lease_id})).cancelled.size(), 1u);
  EXPECT_EQ(hub->counters()["leases_revoked"], 1);
}

TEST_F(FairLease, AHoarderHoldsOneLeaseAndABetterWorkerPreemptsIt) {
  config.max_open_groups = 1;
  open_hub();
  publish(1);
  const auto h = join("hoarder");
  const auto first = *hub->lease(h).lease;
  clock += 3001;
  hub->expire_leases();
  EXPECT_EQ(worker_status(h)["standing"], "hoarder");
  // Nobody else wants it: the hoarder may have the group again, but one lease only.
  const auto again = *hub->lease(h).lease;
  EXPECT_EQ(again.group_id, first.group_id);
  EXPECT_FALSE(hub->lease(h).lease) << "a hoarder's cap is one lease";
  // A new worker finds no free group (max_open_groups = 1): it takes the hoarder's lease over.
  const auto x = join("newcomer");
  const auto lx = hub->lease(x).lease;
  ASSERT_TRUE(lx.has_value());
  EXPECT_EQ(lx->group_id, first.group_id);
  EXPECT_EQ(hub->counters()["leases_preempted"], 1);
  EXPECT_EQ(hub->heartbeat(h, beat(h, {again.lease_id})).cancelled,
            std::vector<std::string>{again.lease_id});
  // The hoarder cannot preempt back.
  EXPECT_FALSE(hub->lease(h).lease);
  EXPECT_EQ(hub->counters()["leases_preempted"], 1);
  // An accepted rollout restores its standing.
  complete(x, *lx);
  const auto y = *hub->lease(h).lease;
  ASSERT_EQ(hub->submit(h, rollout(h, y, "<answer>x</answer>", 1)).status,
            net::IntakeStatus::kAccepted);
  EXPECT_EQ(worker_status(h)["standing"], "proven");
}

TEST_F(FairLease, VerificationOffBeyondLoopbackShowsInStatus) {
  config.beyond_loopback = true;
  open_hub();
  const auto s = hub->status();
  EXPECT_FALSE(s["verification"]["enabled"].get<bool>());
  EXPECT_NE(s["verification"]["warning"].get<std::string>().find("unchecked"), std::string::npos);
  config.beyond_loopback = false;
  open_hub();
  EXPECT_FALSE(hub->status()["verification"].contains("warning")) << "loopback: as before";
}

}  // namespace
}  // namespace stoa::hub::testing
