// Weight-sync faults with real processes. A worker reaches the hub through a small proxy in this
// test that corrupts or truncates the blobs it relays:
//   - every blob bit-flipped, then every blob truncated: the worker refuses each one (content
//     hash), never leases and never generates — no verified weights, no rollouts;
//   - only patches corrupted: it falls back to anchors and generates with those (stale but
//     correct weights);
//   - clean again: it catches up by patches.
// Then the worker is frozen (SIGSTOP) while the trainer publishes past the blob retention
// (keep_anchors = 1): on SIGCONT its patch route is gone and it catches up from an anchor.
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "integration/cluster.h"
#include "support/loopback_server.h"

namespace stoa::integration {
namespace {

class BlobProxy {
 public:
  enum class Mode { kClean, kCorruptAll, kTruncateAll, kCorruptPatches };

  explicit BlobProxy(int hub_port) : hub_port_(hub_port) {
    server_.http.new_task_queue = [] { return new httplib::ThreadPool(16); };
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      forward(req, res);
    };
    server_.http.Get(".*", handler);
    server_.http.Post(".*", handler);
    server_.start();
  }
  std::string url() const { return server_.url(); }
  void set_mode(Mode m) { mode_ = m; }
  int64_t tampered() const { return tampered_; }

 private:
  void forward(const httplib::Request& req, httplib::Response& res) {
    httplib::Client c("127.0.0.1", hub_port_);
    c.set_read_timeout(90, 0);
    httplib::Headers h;
    if (req.has_header("Authorization"))
      h.emplace("Authorization", req.get_header_value("Authorization"));
    std::string target = req.path;
    if (!req.params.empty()) {
      target += "?";
      for (const auto& [k, v] : req.params) target += k + "=" + v + "&";
      target.pop_back();
    }
    httplib::Result r = req.method == "GET"
                            ? c.Get(target.c_str(), h)
                            : c.Post(target.c_str(), h, req.body, "application/json");
    if (!r) {
      res.status = 502;
      return;
    }
    std::string body = r->body;
    const bool blob = req.path.rfind("/v1/blobs/", 0) == 0 && r->status == 200;
    if (req.path == "/v1/version" && r->status == 200) {
      // Learn which hashes are patches (the route's kinds), for kCorruptPatches.
      auto j = nlohmann::json::parse(body, nullptr, false);
      if (j.is_object() && j.contains("blobs")) {
        std::lock_guard lock(mutex_);
        for (const auto& b : j["blobs"])
          if (b.value("kind", "") == "patch") patches_.insert(b.value("hash", ""));
      }
    }
    if (blob) {
      const std::string hash = req.path.substr(10);
      bool is_patch;
      {
        std::lock_guard lock(mutex_);
        is_patch = patches_.count(hash) > 0;
      }
      const Mode m = mode_;
      if (m == Mode::kCorruptAll || (m == Mode::kCorruptPatches && is_patch)) {
        body[body.size() / 2] ^= 0x20;
        ++tampered_;
      } else if (m == Mode::kTruncateAll) {
        body.resize(body.size() / 2);
        ++tampered_;
      }
    }
    res.status = r->status;
    res.set_content(body, r->get_header_value("Content-Type").c_str());
  }

  int hub_port_;
  std::atomic<Mode> mode_{Mode::kClean};
  std::atomic<int64_t> tampered_{0};
  std::mutex mutex_;
  std::set<std::string> patches_;
  test::LoopbackServer server_;  // last: it stops before what forward() uses goes
};

int64_t leases_of(const Cluster& c, const std::string& worker_id) {
  int64_t n = 0;
  for (const auto& l : read_ledger(c.ledger_path()).leases) n += l.worker == worker_id;
  return n;
}

TEST(Blobs, BadBlobsAreRefusedAndAFarBehindWorkerCatchesUpFromAnAnchor) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  RunSpec spec;
  spec.anchor_every = 2;
  spec.keep_anchors = 1;
  spec.max_staleness = 3;
  Cluster c("blobs", spec);
  c.start_hub();
  c.start_worker("honest");
  BlobProxy proxy(c.port());
  proxy.set_mode(BlobProxy::Mode::kCorruptAll);
  c.start_worker("victim", proxy.url());

  auto victim = [&] { return c.worker_status("victim"); };
  for (auto mode : {BlobProxy::Mode::kCorruptAll, BlobProxy::Mode::kTruncateAll}) {
    proxy.set_mode(mode);
    const int64_t before = proxy.tampered();
    ASSERT_TRUE(
        wait_until([&] { return proxy.tampered() >= before + 4 && !victim().is_null(); }, 90s))
        << c.logs();
    // Refused every time: no verified weights, so no lease and no rollout.
    auto w = victim();
    EXPECT_TRUE(w["version"].is_null()) << w.dump();
    EXPECT_EQ(w.value("rollouts_accepted", -1), 0) << w.dump();
    EXPECT_EQ(leases_of(c, w["id"]), 0);
    ASSERT_TRUE(c.worker("victim").running()) << c.worker("victim").err();
  }
  EXPECT_NE(c.worker("victim").err().find("hashing to"), std::string::npos)
      << c.worker("victim").err();

  // Patches corrupted, anchors intact: the worker generates from anchors only.
  proxy.set_mode(BlobProxy::Mode::kCorruptPatches);
  ASSERT_TRUE(wait_until(
      [&] {
        auto w = victim();
        return w["version"].is_number() && w["version"].get<int64_t>() >= 2 &&
               w.value("rollouts_accepted", 0) > 0;
      },
      120s))
      << c.status().dump() << c.logs();
  EXPECT_NE(c.worker("victim").err().find("catching up from an anchor"), std::string::npos)
      << c.worker("victim").err();

  // Clean again: it follows by patches.
  proxy.set_mode(BlobProxy::Mode::kClean);
  const int64_t latest = c.status()["latest_version"].get<int64_t>();
  ASSERT_TRUE(wait_until(
      [&] {
        auto w = victim();
        return w["version"].is_number() && w["version"].get<int64_t>() > latest;
      },
      120s))
      << c.status().dump() << c.logs();

  // Far behind: frozen while the trainer moves past the retention (one anchor kept).
  const int64_t frozen_at = victim()["version"].get<int64_t>();
  c.worker("victim").signal(SIGSTOP);
  ASSERT_TRUE(wait_until(
      [&] { return c.status()["latest_version"].get<int64_t>() >= frozen_at + 5; }, 150s))
      << c.status().dump() << c.logs();
  // Its patch route is pruned: the hub's plan from there starts with an anchor.
  {
    httplib::Client hc("127.0.0.1", c.port());
    auto j = hc.Post("/v1/join",
                     httplib::Headers{{"Authorization", std::string("Bearer ") + Cluster::kToken}},
                     R"({"protocol":1,"arithmetic":2,"name":"probe"})", "application/json");
    ASSERT_TRUE(j && j->status == 200);
    const std::string session = nlohmann::json::parse(j->body)["session_token"];
    auto r = hc.Get(("/v1/version?timeout=0&after=" + std::to_string(frozen_at)).c_str(),
                    httplib::Headers{{"Authorization", "Bearer " + session}});
    ASSERT_TRUE(r && r->status == 200);
    auto info = nlohmann::json::parse(r->body);
    ASSERT_FALSE(info["blobs"].empty()) << info.dump();
    EXPECT_EQ(info["blobs"][0]["kind"], "anchor") << info.dump();
  }
  const int64_t accepted_frozen = victim().value("rollouts_accepted", 0);
  c.worker("victim").signal(SIGCONT);
  ASSERT_TRUE(wait_until(
      [&] {
        auto w = victim();
        return w["version"].is_number() && w["version"].get<int64_t>() >= frozen_at + 5 &&
               w.value("rollouts_accepted", 0) > accepted_frozen;
      },
      120s))
      << c.status().dump() << c.logs();
  const std::string log = c.worker("victim").err();
  const size_t after_freeze = log.rfind("generating with version");
  ASSERT_NE(after_freeze, std::string::npos);
  // Some switch after the freeze came from an anchor.
  bool anchored = false;
  for (size_t p = log.find("generating with version"); p != std::string::npos;
       p = log.find("generating with version", p + 1)) {
    const size_t eol = log.find('\n', p);
    const std::string line = log.substr(p, eol - p);
    const int64_t v = std::stoll(line.substr(std::string("generating with version ").size()));
    if (v > frozen_at && line.find("(anchor)") != std::string::npos) anchored = true;
  }
  EXPECT_TRUE(anchored) << log;

  c.stop_all();
  const auto counters = last_json_line(c.hub().out())["counters"];
  EXPECT_EQ(counters.value("rollouts_rejected_bad_token_id", 0.0), 0.0) << counters.dump();
}

}  // namespace
}  // namespace stoa::integration
