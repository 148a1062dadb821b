// kill -9 the hub/trainer process and restart it on the same run directory and port: it resumes
// from the checkpoint and the ledger, every rollout that got an HTTP 200 before the kill is still
// in the ledger, no group is trained twice, and the worker (which never restarted) follows the
// restarted trainer with patches: the restart's first version is a patch from the published int8
// view, rebuilt from the blob store, so the worker downloads no anchor. The worker reaches the hub
// through a byte-counting proxy; the bytes it downloads across the restart are printed. A
// scripted client submits rollouts alongside and records every acknowledged id. The worker is
// started before the hub listens (its join retries).
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "integration/cluster.h"
#include "net/hub_client.h"
#include "net/link_proxy.h"
#include "pulse/catalog.h"
#include "roles/worker/rollout_record.h"

namespace stoa::integration {
namespace {

// Leases groups and answers them with short, valid rollouts (the prompt's own first tokens as
// the "generated" part, at the latest version), recording every id the hub acknowledged.
class ScriptedClient {
 public:
  explicit ScriptedClient(const std::string& url) : url_(url) {
    thread_ = std::thread([this] { loop(); });
  }
  ~ScriptedClient() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::set<std::string> acknowledged() const {
    std::lock_guard lock(mutex_);
    return acked_;
  }
  std::string last_error() const {
    std::lock_guard lock(mutex_);
    return error_;
  }

 private:
  void loop() {
    net::HttpClientOptions o;
    o.max_attempts = 3;
    o.backoff_base = 50ms;
    o.backoff_max = 500ms;
    o.connect_timeout = 1000ms;
    net::HubClient hub(url_, o);
    bool joined = false;
    while (!stop_) {
      try {
        if (!joined) {
          net::JoinRequest j;
          j.name = "scripted";
          hub.join(Cluster::kToken, j);
          joined = true;
        }
        auto lr = hub.lease();
        if (!lr.lease) {
          std::this_thread::sleep_for(std::chrono::milliseconds(lr.retry_after_ms));
          continue;
        }
        const auto& l = *lr.lease;
        const uint64_t version = hub.version(std::nullopt, 0s).version.value_or(0);
        for (int s = 0; s < l.samples && !stop_; ++s) {
          worker::RolloutRecord record(l, hub.worker_id());
          for (size_t t = 0; t < 4 && t < l.prompt_tokens.size(); ++t)
            record.add_generated(l.prompt_tokens[t], -1.0f - static_cast<float>(s), version);
          record.set_turns(1);
          const net::RolloutSubmission r = record.finish();
          auto resp = hub.submit(r);
          std::lock_guard lock(mutex_);
          if (resp.status == net::IntakeStatus::kAccepted) acked_.insert(r.id);
          if (resp.status == net::IntakeStatus::kRejected) error_ = resp.reason + " " + resp.detail;
        }
      } catch (const std::exception& e) {
        {
          std::lock_guard lock(mutex_);
          error_ = e.what();
        }
        std::this_thread::sleep_for(200ms);  // the hub is down: try again
      }
      std::this_thread::sleep_for(300ms);  // leave the prompts to the real worker mostly
    }
  }

  std::string url_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::set<std::string> acked_;
  std::string error_;
};

TEST(HubKill, RestartResumesAndKeepsEveryAcknowledgedRollout) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  RunSpec spec;
  spec.port = free_port();
  ASSERT_GT(spec.port, 0);
  spec.anchor_every = 50;  // only the run's first version is an anchor: the rest are patches
  Cluster c("hub_kill", spec);
  // Everything the worker receives passes the proxy (no delay, no rate limit) and is counted.
  net::LinkProxyOptions po;
  po.target_port = spec.port;
  net::LinkProxy proxy(po);
  // The worker starts first (as `stoa demo` / `stoa bench fleet` may start them): its join
  // retries until the hub listens.
  c.start_worker("w1", proxy.url());
  std::this_thread::sleep_for(1000ms);
  const std::string url = c.start_hub();
  ScriptedClient scripted(url);

  ASSERT_TRUE(wait_until(
      [&] {
        auto w = c.worker_status("w1");
        return c.step() >= 2 && scripted.acknowledged().size() >= 4 && !w.is_null() &&
               w.value("rollouts_accepted", 0) >= 2;
      },
      150s))
      << c.status().dump() << "\nscripted: " << scripted.last_error() << c.logs();
  const int64_t w1_before = c.worker_status("w1").value("rollouts_accepted", 0);
  c.kill_hub();
  const size_t log_at_kill = c.worker("w1").err().size();
  const uint64_t down_at_kill = proxy.counters().bytes_to_client;
  const auto switches_before = weight_switches(c.worker("w1").err());
  ASSERT_FALSE(switches_before.empty()) << c.worker("w1").err();
  const uint64_t held = switches_before.back().first;  // what the worker generates with
  const std::set<std::string> acked_at_kill = scripted.acknowledged();
  const LedgerView at_kill = read_ledger(c.ledger_path());
  for (const auto& id : acked_at_kill)
    EXPECT_TRUE(at_kill.rollout_group.count(id)) << "acknowledged rollout " << id << " lost";
  ASSERT_TRUE(fs::exists(c.run_dir() / "hub.json")) << "kill -9 cannot clean up";

  // Down for a moment (the worker and the client retry), then back on the same port.
  std::this_thread::sleep_for(1500ms);
  c.start_hub();
  EXPECT_EQ(c.port(), spec.port);
  const auto info = nlohmann::json::parse(read_text(c.run_dir() / "hub.json"));
  EXPECT_TRUE(info["resumed"].get<bool>()) << info.dump();
  const uint64_t restart_version = info["version"].get<uint64_t>();
  EXPECT_GE(static_cast<int64_t>(restart_version), at_kill.versions)
      << "the restarted trainer must publish a fresh version above every published one";
  EXPECT_NE(c.hub().err().find("resumed from checkpoint"), std::string::npos) << c.hub().err();

  EXPECT_NE(c.hub().err().find("continues the published int8 view of version"), std::string::npos)
      << c.hub().err();
  EXPECT_EQ(c.hub().err().find("starts a fresh int8 grid"), std::string::npos) << c.hub().err();

  // The worker follows the restarted trainer with patches: every switch after the kill, the
  // first one at or past the restart's version included, is no anchor.
  ASSERT_TRUE(wait_until(
      [&] {
        const auto after = weight_switches(c.worker("w1").err(), log_at_kill);
        return !after.empty() && after.back().first >= restart_version;
      },
      60s))
      << c.worker("w1").err() << c.logs();
  const uint64_t down = proxy.counters().bytes_to_client - down_at_kill;
  const auto switches_after = weight_switches(c.worker("w1").err(), log_at_kill);
  for (const auto& [version, anchor] : switches_after)
    EXPECT_FALSE(anchor) << "version " << version << " was loaded from an anchor after the restart";
  const pulse::Catalog catalog =
      pulse::Catalog::load((c.run_dir() / "blobs" / "catalog.json").string());
  uint64_t route_bytes = 0;
  for (const auto& e : catalog.plan(held, switches_after.back().first)) {
    EXPECT_EQ(e.kind, pulse::BlobKind::kPatch);
    route_bytes += e.bytes;
  }
  const auto anchor = catalog.newest_anchor(switches_after.back().first);
  ASSERT_TRUE(anchor.has_value());
  std::printf(
      "hub restart: worker held version %llu, generates with %llu after it; downloaded %llu "
      "bytes across the restart (every response on the wire), of which %llu bytes of patches; "
      "an anchor of this model is %llu bytes\n",
      static_cast<unsigned long long>(held),
      static_cast<unsigned long long>(switches_after.back().first),
      static_cast<unsigned long long>(down), static_cast<unsigned long long>(route_bytes),
      static_cast<unsigned long long>(anchor->bytes));
  EXPECT_LT(down, anchor->bytes) << "the worker downloaded more than an anchor across the restart";

  // Training goes on and the worker's rollouts count again.
  ASSERT_TRUE(wait_until(
      [&] {
        auto w = c.worker_status("w1");
        return c.step() >= at_kill.steps + 2 && !w.is_null() && w["version"].is_number() &&
               w["version"].get<uint64_t>() >= restart_version &&
               w.value("rollouts_accepted", 0) > w1_before;
      },
      150s))
      << c.status().dump() << c.logs();
  const size_t acked_after = scripted.acknowledged().size();
  EXPECT_TRUE(wait_until([&] { return scripted.acknowledged().size() > acked_after; }, 60s))
      << "the scripted client never got through again: " << scripted.last_error();

  scripted.stop();
  c.stop_all();
  proxy.stop();
  const LedgerView v = read_ledger(c.ledger_path());
  for (const auto& id : scripted.acknowledged())
    EXPECT_TRUE(v.rollout_group.count(id)) << "acknowledged rollout " << id << " lost";
  std::set<std::string> unique(v.step_group_ids.begin(), v.step_group_ids.end());
  EXPECT_EQ(unique.size(), v.step_group_ids.size()) << "a group was trained twice";
  // Steps before the kill are still there, with the same groups.
  for (size_t i = 0; i < at_kill.step_group_ids.size(); ++i)
    EXPECT_EQ(v.step_group_ids.at(i), at_kill.step_group_ids[i]);
  for (const auto& [g, n] : v.group_rollouts) EXPECT_LE(n, v.group_samples.at(g)) << g;
}

}  // namespace
}  // namespace stoa::integration
