#include <thread>

#include "roles/hub/hub_fixture.h"

namespace stoa::hub::testing {
namespace {

class Port : public HubFixture {
 protected:
  // Fills one group (G = 2) through the intake; returns its id.
  std::string fill_group(const std::string& worker) {
    auto l = *hub->lease(worker).lease;
    for (int i = 0; i < l.samples; ++i) {
      auto r = hub->submit(worker, rollout(worker, l, "<answer>x</answer>", 1));
      EXPECT_EQ(r.status, net::IntakeStatus::kAccepted) << r.detail;
    }
    return l.group_id;
  }
};

TEST_F(Port, CompleteGroupsOnceAndNotTrainedTwiceAcrossARestart) {
  open_hub();
  publish(1);
  auto w = join();
  auto g1 = fill_group(w);
  auto g2 = fill_group(w);
  auto got = hub->take_groups(1, std::chrono::milliseconds(0));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].group_id, g1);
  ASSERT_EQ(got[0].rollouts.size(), 2u);
  EXPECT_EQ(got[0].min_version(), 1u);
  EXPECT_FALSE(got[0].rollouts[0].tokens.empty());
  // Pending groups are not handed out twice in this process.
  auto got2 = hub->take_groups(10, std::chrono::milliseconds(0));
  ASSERT_EQ(got2.size(), 1u);
  EXPECT_EQ(got2[0].group_id, g2);
  StepReport rep;
  rep.step = 1;
  rep.masked_fraction = 0.25;
  hub->mark_trained({g1}, rep);
  // Crash before g2 is marked: after a restart g2 comes back, g1 never does.
  open_hub();
  EXPECT_EQ(hub->last_step(), 1);
  auto again = hub->take_groups(10, std::chrono::milliseconds(0));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].group_id, g2);
  hub->mark_dropped({g2}, "stale");
  open_hub();
  EXPECT_TRUE(hub->take_groups(10, std::chrono::milliseconds(0)).empty());
  auto c = hub->counters();
  EXPECT_EQ(c["groups_trained"], 1);
  EXPECT_EQ(c["groups_dropped_stale"], 1);
  EXPECT_EQ(c["rollouts_accepted"], 4);
}

TEST_F(Port, TakeGroupsWaitsForTheIntake) {
  open_hub();
  publish(1);
  auto w = join();
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fill_group(w);
  });
  auto got = hub->take_groups(4, std::chrono::seconds(20));
  producer.join();
  EXPECT_EQ(got.size(), 1u);
}

TEST_F(Port, PublishWakesLongPollsAndPlansFromTheCatalog) {
  open_hub();
  auto info = hub->version_info(std::nullopt);
  EXPECT_FALSE(info.version.has_value());
  std::thread publisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    publish(5);
  });
  auto t0 = std::chrono::steady_clock::now();
  auto got = hub->wait_version(0, std::chrono::seconds(20));
  publisher.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  ASSERT_TRUE(got.version.has_value());
  EXPECT_EQ(*got.version, 5u);
  // Already current: the long-poll times out and answers the same version, no blobs.
  auto same = hub->wait_version(5, std::chrono::milliseconds(50));
  EXPECT_EQ(same.version.value_or(0), 5u);
  EXPECT_TRUE(same.blobs.empty());
  EXPECT_EQ(hub->latest_version().value_or(0), 5u);
}

TEST_F(Port, MetricsAndStatusCarryTheNumbers) {
  open_hub();
  publish(1);
  auto w = join();
  auto g = fill_group(w);
  hub->take_groups(1, std::chrono::milliseconds(0));
  StepReport rep;
  rep.step = 3;
  rep.masked_fraction = 0.125;
  rep.tv = 0.01;
  rep.extra["patch_bytes"] = 1234;
  hub->mark_trained({g}, rep);
  net::Heartbeat hb;
  hb.worker_id = w;
  hb.version = 1;
  hb.tokens_per_s = 42;
  hub->heartbeat(w, hb);
  auto m = hub->metrics();
  EXPECT_NE(m.find("stoa_dppo_masked_fraction 0.125"), std::string::npos) << m;
  EXPECT_NE(m.find("stoa_rollouts_total{status=\"accepted\"} 2"), std::string::npos) << m;
  {  // per-worker series carry the worker's id and name labels
    const std::string series = "stoa_worker_tokens_per_second{worker=\"" + w + "\",name=\"";
    const size_t at = m.find(series);
    ASSERT_NE(at, std::string::npos) << m;
    const std::string line = m.substr(at, m.find('\n', at) - at);
    EXPECT_EQ(line.substr(line.size() - 5), "\"} 42") << line;
  }
  EXPECT_NE(m.find("stoa_rollout_staleness_versions_count 2"), std::string::npos) << m;
  EXPECT_NE(m.find("stoa_train_patch_bytes 1234"), std::string::npos) << m;
  auto s = hub->status();
  EXPECT_EQ(s["step"], 3);
  EXPECT_EQ(s["workers"][0]["patch_lag"], 0);
}

}  // namespace
}  // namespace stoa::hub::testing
