// The streaming client: rollouts go out in order from a background thread; the real HubClient
// retries 5xx with the same id (so the hub's idempotency key dedupes), a hub that stays down
// keeps rollouts queued and spooled, and a restarted worker re-sends its spool.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include <httplib.h>

#include "core/error.h"
#include "net/hub_client.h"
#include "roles/worker/rollout_record.h"
#include "roles/worker/rollout_streamer.h"
#include "support/loopback_server.h"

namespace stoa::worker {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

net::RolloutSubmission make_rollout() {
  net::Lease lease;
  lease.lease_id = "l-1";
  lease.group_id = "g-1";
  lease.prompt_id = "p-1";
  lease.prompt_tokens = {1, 2};
  RolloutRecord rec(lease, "w-1");
  rec.add_generated(3, -0.25f, 7);
  return rec.finish();
}

// A loopback HTTP server speaking the intake's answers: the first `fail_first` POSTs get 503,
// then each id is accepted once and answered "duplicate" afterwards.
struct FlakyIntake {
  FlakyIntake() {
    server.http.Post("/v1/rollouts", [this](const httplib::Request& req, httplib::Response& res) {
      auto sub = net::rollout_submission_from_json(net::parse_body(req.body, "rollout"));
      std::lock_guard lock(mutex);
      arrivals.push_back(sub.id);
      if (failures_left > 0) {
        --failures_left;
        res.status = 503;
        res.set_content(R"({"error":"busy"})", "application/json");
        return;
      }
      const bool dup = !accepted.insert(sub.id).second;
      res.set_content(
          dup ? R"({"status":"duplicate","reward":1.0})" : R"({"status":"accepted","reward":1.0})",
          "application/json");
    });
    server.start();
  }
  std::string url() const { return server.url(); }
  std::mutex mutex;
  int failures_left = 0;
  std::vector<std::string> arrivals;
  std::set<std::string> accepted;
  test::LoopbackServer server;  // last: it stops before the members its handler uses go
};

net::HttpClientOptions fast_retries() {
  net::HttpClientOptions o;
  o.backoff_base = 5ms;
  o.backoff_max = 20ms;
  o.max_attempts = 4;
  o.connect_timeout = 1000ms;
  o.read_timeout = 2000ms;
  return o;
}

TEST(RolloutStreamer, RealClientRetries5xxWithTheSameId) {
  FlakyIntake hub;
  hub.failures_left = 2;
  net::HubClient client(hub.url(), fast_retries());
  RolloutStreamer streamer([&](const net::RolloutSubmission& r) { return client.submit(r); }, "",
                           5ms, 20ms);
  const net::RolloutSubmission r = make_rollout();
  streamer.push(r);
  ASSERT_TRUE(streamer.flush(10s));
  StreamCounters c = streamer.counters();
  EXPECT_EQ(c.accepted, 1u);
  EXPECT_EQ(c.transport_failures, 0u);  // the client's own retries absorbed the 503s
  std::lock_guard lock(hub.mutex);
  ASSERT_EQ(hub.arrivals.size(), 3u);
  for (const auto& id : hub.arrivals) EXPECT_EQ(id, r.id);
  EXPECT_EQ(hub.accepted.size(), 1u);
}

TEST(RolloutStreamer, HubDownKeepsRolloutsQueuedAndDeliversThemLater) {
  FlakyIntake hub;
  hub.failures_left = 9;  // more than one client call's attempts: the streamer must re-queue
  net::HubClient client(hub.url(), fast_retries());
  RolloutStreamer streamer([&](const net::RolloutSubmission& r) { return client.submit(r); }, "",
                           5ms, 20ms);
  const net::RolloutSubmission a = make_rollout(), b = make_rollout();
  streamer.push(a);
  streamer.push(b);
  ASSERT_TRUE(streamer.flush(20s));
  StreamCounters c = streamer.counters();
  EXPECT_EQ(c.accepted, 2u);
  EXPECT_GE(c.transport_failures, 1u);
  std::lock_guard lock(hub.mutex);
  EXPECT_EQ(hub.accepted, (std::set<std::string>{a.id, b.id}));
  // In order: a was retried until it went through before b was first sent.
  auto first_b = std::find(hub.arrivals.begin(), hub.arrivals.end(), b.id);
  EXPECT_EQ(std::count(first_b, hub.arrivals.end(), a.id), 0);
}

TEST(RolloutStreamer, SpoolSurvivesARestartAndResendsAreCountedOnce) {
  const fs::path spool = fs::temp_directory_path() / ("stoa_spool_" + net::random_token());
  FlakyIntake hub;
  net::HubClient client(hub.url(), fast_retries());
  const net::RolloutSubmission a = make_rollout(), b = make_rollout();
  {
    // A worker whose hub is unreachable: both rollouts stay spooled when it stops.
    RolloutStreamer down(
        [](const net::RolloutSubmission&) -> net::RolloutResponse {
          fail(ErrorKind::kNetwork, "connection refused");
        },
        spool.string(), 5ms, 20ms);
    down.push(a);
    down.push(b);
    EXPECT_FALSE(down.flush(100ms));
    down.stop(false);
  }
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(spool)) files += e.path().extension() == ".json";
  EXPECT_EQ(files, 2u);
  // a actually reached the hub before the crash (its 200 was lost): the resend is a duplicate.
  hub.accepted.insert(a.id);
  RolloutStreamer up([&](const net::RolloutSubmission& r) { return client.submit(r); },
                     spool.string(), 5ms, 20ms);
  ASSERT_TRUE(up.flush(10s));
  StreamCounters c = up.counters();
  EXPECT_EQ(c.resumed, 2u);
  EXPECT_EQ(c.accepted, 1u);
  EXPECT_EQ(c.duplicate, 1u);
  EXPECT_EQ(hub.accepted, (std::set<std::string>{a.id, b.id}));
  EXPECT_TRUE(fs::is_empty(spool));
  fs::remove_all(spool);
}

TEST(RolloutStreamer, UnreadableSpoolFileIsSetAsideNotFatal) {
  const fs::path spool = fs::temp_directory_path() / ("stoa_spool_" + net::random_token());
  fs::create_directories(spool);
  { std::ofstream(spool / "junk.json") << "{not json"; }
  RolloutStreamer s([](const net::RolloutSubmission&) { return net::RolloutResponse{}; },
                    spool.string());
  EXPECT_EQ(s.counters().resumed, 0u);
  EXPECT_TRUE(fs::exists(spool / "junk.json.bad"));
  s.stop(false);
  fs::remove_all(spool);
}

TEST(RolloutStreamer, StructurallyBadRolloutIsRefusedAtPush) {
  RolloutStreamer s([](const net::RolloutSubmission&) { return net::RolloutResponse{}; }, "");
  net::RolloutSubmission r = make_rollout();
  r.mask.pop_back();
  EXPECT_THROW(s.push(r), Error);
}

}  // namespace
}  // namespace stoa::worker
