// Issue 18's abuse limits and identity, against a real hub over loopback HTTP(S): hostile worker
// names stay text, a worker id cannot be taken over without its secret, floods get 429 with
// Retry-After while honest workers go on, idle workers expire, revoked tokens end their
// sessions on the live hub, session tokens rotate and expire transparently for the client,
// TLS pinning refuses a different certificate, and off loopback the observability routes need
// the operator token.
#include <httplib.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "engine/arithmetic.h"
#include "net/hub_client.h"
#include "net/join_string.h"
#include "net/secret.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"
#include "roles/hub/identity/tls_identity.h"
#include "roles/hub/observe/dashboard.h"

namespace stoa::hub::testing {
namespace {

using namespace std::chrono_literals;

class Identity : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    config.lease_ttl_ms = 600'000;
  }
  void serve(const std::string& host = "127.0.0.1") {
    open_hub();
    publish(1);
    ServerOptions so;
    so.host = host;
    so.threads = 8;
    HubFixture::serve(so);
  }
  net::HttpClientOptions fast() {
    net::HttpClientOptions o;
    o.backoff_base = 5ms;
    o.max_attempts = 3;
    return o;
  }
  httplib::Result raw(const std::string& method, const std::string& path, const std::string& body,
                      const std::string& token) {
    httplib::Client c("127.0.0.1", server->port());
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    return method == "GET" ? c.Get(path.c_str(), h)
                           : c.Post(path.c_str(), h, body, "application/json");
  }
};

TEST_F(Identity, HostileNamesStayTextInStatusMetricsAndTheDashboard) {
  serve();
  const std::string hostile = "<img src=x onerror=\"alert(1)\">\"\\\n</script>";
  net::HubClient client(server->url(), fast());
  net::JoinRequest jr;
  jr.name = hostile;
  client.join("join-secret", jr);
  // The name comes back byte for byte (JSON-escaped by the encoder, never interpreted).
  auto st = raw("GET", "/v1/status", "", "");
  ASSERT_TRUE(st);
  auto j = nlohmann::json::parse(st->body);
  ASSERT_EQ(j["workers"].size(), 1u);
  EXPECT_EQ(j["workers"][0]["name"], hostile);
  // Prometheus label values escape quotes, backslashes and newlines.
  auto m = raw("GET", "/metrics", "", "");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("name=\"<img src=x onerror=\\\"alert(1)\\\">\\\"\\\\\\n</script>\""),
            std::string::npos)
      << m->body;
  // The page builds every table from text nodes: no markup is ever made from data.
  const std::string page = dashboard_html();
  EXPECT_EQ(page.find("innerHTML"), std::string::npos);
  EXPECT_EQ(page.find("outerHTML"), std::string::npos);
  EXPECT_EQ(page.find("insertAdjacentHTML"), std::string::npos);
  EXPECT_EQ(page.find("document.write"), std::string::npos);
  EXPECT_NE(page.find("textContent"), std::string::npos);
  EXPECT_NE(page.find("createElement"), std::string::npos);
}

TEST_F(Identity, ResumingAWorkerIdNeedsItsSecret) {
  serve();
  net::HubClient owner(server->url(), fast());
  auto joined = owner.join("join-secret", {});
  ASSERT_FALSE(joined.worker_secret.empty());
  // The id is public (status lists it); alone, or with a wrong secret, it is refused.
  for (const std::string& secret : {std::string(), std::string("guess"), joined.session_token}) {
    nlohmann::json body = {{"protocol", 1},
                           {"arithmetic", 2},
                           {"resume_id", joined.worker_id},
                           {"resume_secret", secret}};
    auto r = raw("POST", "/v1/join", body.dump(), "join-secret");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403) << r->body;
  }
  EXPECT_EQ(hub->counters()["resume_refused"], 3);
  // The owner was not evicted.
  EXPECT_TRUE(owner.lease().lease.has_value());
  // With the secret: the same identity, and its old session ends.
  net::HubClient restarted(server->url(), fast());
  net::JoinRequest resume;
  resume.resume_id = joined.worker_id;
  resume.resume_secret = joined.worker_secret;
  auto again = restarted.join("join-secret", resume);
  EXPECT_EQ(again.worker_id, joined.worker_id);
  EXPECT_TRUE(again.worker_secret.empty());  // keeps the one it has
  auto old_session =
      raw("POST", "/v1/lease", nlohmann::json{{"worker_id", joined.worker_id}}.dump(),
          joined.session_token);
  ASSERT_TRUE(old_session);
  EXPECT_EQ(old_session->status, 401);
  EXPECT_EQ(restarted.worker_id(), joined.worker_id);
}

// Bits of two formulas are never compared: a worker of another engine arithmetic (a build from
// before the field says nothing, which is arithmetic 1) is refused at the door with words a
// volunteer can act on, and the client side refuses a hub of another arithmetic.
TEST_F(Identity, AWorkerOfAnotherArithmeticIsRefusedInPlainWords) {
  serve();
  for (const std::string& body : {std::string(R"({"protocol":1,"name":"old"})"),
                                  std::string(R"({"protocol":1,"arithmetic":3,"name":"new"})")}) {
    auto r = raw("POST", "/v1/join", body, "join-secret");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 409) << r->body;
    EXPECT_NE(r->body.find("Install the stoa release the run's operator uses"), std::string::npos)
        << r->body;
  }
  EXPECT_TRUE(hub->status()["workers"].empty());
  net::HubClient current(server->url(), fast());
  EXPECT_EQ(current.join("join-secret", {}).arithmetic, engine::kArithmetic);
  try {
    engine::require_hub_arithmetic(1, "worker");
    ADD_FAILURE() << "a hub of arithmetic 1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("computes engine arithmetic 1"), std::string::npos);
  }
}

TEST_F(Identity, FloodsGet429WithRetryAfterAndHonestWorkersGoOn) {
  config.limits.join_per_ip = {1, 4};
  config.limits.lease_per_worker = {2, 3};
  config.limits.rollouts_per_worker = {2, 3};
  serve();
  net::HubClient honest(server->url(), fast());
  auto h = honest.join("join-secret", {});
  // A join flood from one address: the burst passes, then 429 with Retry-After.
  int ok = 0, limited = 0;
  std::string retry_after;
  for (int i = 0; i < 20; ++i) {
    auto r =
        raw("POST", "/v1/join", R"({"protocol":1,"arithmetic":2,"name":"flood"})", "join-secret");
    ASSERT_TRUE(r);
    if (r->status == 200) ++ok;
    if (r->status == 429) {
      ++limited;
      retry_after = r->get_header_value("Retry-After");
    }
  }
  EXPECT_LE(ok, 4);
  EXPECT_GE(limited, 16);
  EXPECT_EQ(retry_after, "1");
  // A lease and a rollout flood from one joined worker hit its own buckets...
  net::HubClient flooder(server->url(), fast());
  std::this_thread::sleep_for(1100ms);  // a join token back for this address
  auto f = flooder.join("join-secret", {});
  int lease_429 = 0, rollout_429 = 0;
  const nlohmann::json lease_body = {{"worker_id", f.worker_id}};
  std::optional<net::Lease> flood_lease;
  for (int i = 0; i < 15; ++i) {
    auto r = raw("POST", "/v1/lease", lease_body.dump(), f.session_token);
    ASSERT_TRUE(r);
    lease_429 += r->status == 429 && !r->get_header_value("Retry-After").empty();
    if (r->status == 200 && !flood_lease)
      flood_lease = net::lease_response_from_json(nlohmann::json::parse(r->body)).lease;
  }
  ASSERT_TRUE(flood_lease.has_value());
  // The same valid rollout over and over (accepted once, then duplicates, then refused).
  const auto spam = net::to_json(rollout(f.worker_id, *flood_lease, "<answer>y</answer>", 1));
  for (int i = 0; i < 15; ++i) {
    auto s = raw("POST", "/v1/rollouts", spam.dump(), f.session_token);
    ASSERT_TRUE(s);
    rollout_429 += s->status == 429;
  }
  EXPECT_GE(lease_429, 10);
  EXPECT_GE(rollout_429, 10);
  // ...while the honest worker still leases, submits and heartbeats.
  auto lease = honest.lease();
  ASSERT_TRUE(lease.lease.has_value());
  auto sub = honest.submit(rollout(h.worker_id, *lease.lease, "<answer>x</answer>", 1));
  EXPECT_EQ(sub.status, net::IntakeStatus::kAccepted) << sub.detail;
  net::Heartbeat hb;
  hb.worker_id = h.worker_id;
  EXPECT_NO_THROW(honest.heartbeat(hb));
  EXPECT_GT(hub->counters()["rate_limited"], 30);
  // The client honours Retry-After: five leases against a burst of 3 and 2 a second all
  // succeed, the last ones after waiting out their 429s (about a second in all).
  const uint64_t throttled_before = honest.http().throttled();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) {
    auto l = honest.lease();
    ASSERT_TRUE(l.lease.has_value());
    honest.release(l.lease->lease_id);
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 400ms);
  EXPECT_GE(honest.http().throttled(), throttled_before + 1);
}

TEST_F(Identity, IdleWorkersExpireAndLeaveStatusAndMetrics) {
  config.worker_idle_expiry_ms = 600'000;
  serve();
  net::HubClient alive(server->url(), fast()), idle(server->url(), fast());
  net::JoinRequest a, b;
  a.name = "alive";
  b.name = "idle";
  auto ja = alive.join("join-secret", a);
  auto jb = idle.join("join-secret", b);
  net::Heartbeat hb;
  hb.worker_id = ja.worker_id;
  clock += 400'000;
  alive.heartbeat(hb);
  clock += 300'000;  // idle: 700 s without a heartbeat; alive: 300 s
  hub->expire_workers();
  auto st = nlohmann::json::parse(raw("GET", "/v1/status", "", "")->body);
  ASSERT_EQ(st["workers"].size(), 1u) << st.dump();
  EXPECT_EQ(st["workers"][0]["name"], "alive");
  EXPECT_EQ(st["counters"]["workers_expired"], 1);
  EXPECT_EQ(raw("GET", "/metrics", "", "")->body.find("name=\"idle\""), std::string::npos);
  // Its session is gone; the client resumes transparently (the hub forgot the id: a new one).
  EXPECT_EQ(
      raw("POST", "/v1/lease", nlohmann::json{{"worker_id", jb.worker_id}}.dump(), jb.session_token)
          ->status,
      401);
  EXPECT_TRUE(idle.lease().lease.has_value());
  EXPECT_EQ(idle.session_renewals(), 1u);
  EXPECT_NE(idle.worker_id(), jb.worker_id);
}

TEST_F(Identity, StatusIsPaginated) {
  config.status_max_workers = 3;
  serve();
  for (int i = 0; i < 5; ++i) join("w" + std::to_string(i));
  auto page = nlohmann::json::parse(raw("GET", "/v1/status?offset=1&limit=2", "", "")->body);
  EXPECT_EQ(page["workers"].size(), 2u);
  EXPECT_EQ(page["workers_total"], 5);
  EXPECT_EQ(page["workers_offset"], 1);
  auto capped = nlohmann::json::parse(raw("GET", "/v1/status?limit=1000", "", "")->body);
  EXPECT_EQ(capped["workers"].size(), 3u);  // status_max_workers
  auto past = nlohmann::json::parse(raw("GET", "/v1/status?offset=99", "", "")->body);
  EXPECT_EQ(past["workers"].size(), 0u);
}

TEST_F(Identity, RevokedJoinTokensEndTheirSessionsOnTheLiveHub) {
  serve();
  std::string guest_token = "guest-" + net::random_token();
  {
    Ledger cli(config.ledger_path);  // what `stoa hub token add` does, from another connection
    cli.put_join_token({"guest", net::sha256_hex(guest_token), "work", 1, 0});
  }
  net::HubClient guest(server->url(), fast()), regular(server->url(), fast());
  std::this_thread::sleep_for(600ms);  // the hub looks for token changes twice a second
  guest.join(guest_token, {});
  regular.join("join-secret", {});
  EXPECT_TRUE(guest.lease().lease.has_value());
  {
    Ledger cli(config.ledger_path);
    EXPECT_TRUE(cli.revoke_join_token("guest", 2));
    EXPECT_FALSE(cli.revoke_join_token("nobody", 2));
  }
  std::this_thread::sleep_for(600ms);
  // The session is refused and so is the client's attempt to join again with the token.
  try {
    guest.lease();
    FAIL() << "a revoked token's session still works";
  } catch (const net::JoinRefused& e) {
    EXPECT_EQ(e.status(), 401) << e.what();
  }
  EXPECT_TRUE(regular.lease().lease.has_value());
}

TEST_F(Identity, SessionTokensRotateAndExpireTransparently) {
  config.session_ttl_ms = 60'000;
  serve();
  net::HubClient client(server->url(), fast());
  auto joined = client.join("join-secret", {});
  net::Heartbeat hb;
  hb.worker_id = joined.worker_id;
  EXPECT_TRUE(client.heartbeat(hb).session_token.empty());  // young: no rotation
  clock += 31'000;
  auto rotated = client.heartbeat(hb);
  ASSERT_FALSE(rotated.session_token.empty());
  EXPECT_NE(rotated.session_token, joined.session_token);
  // The old token lapses at its own expiry; the client already uses the new one.
  clock += 30'000;
  EXPECT_EQ(raw("POST", "/v1/lease", nlohmann::json{{"worker_id", joined.worker_id}}.dump(),
                joined.session_token)
                ->status,
            401);
  EXPECT_TRUE(client.lease().lease.has_value());
  EXPECT_EQ(client.session_renewals(), 0u);
  // Long past every token's life (no heartbeats): the client resumes the same id by itself.
  clock += 500'000;
  EXPECT_NO_THROW(client.heartbeat(hb));
  EXPECT_EQ(client.session_renewals(), 1u);
  EXPECT_EQ(client.worker_id(), joined.worker_id);
}

TEST_F(Identity, TlsPinAcceptsTheHubsCertificateAndRefusesAnother) {
  auto tls = ensure_self_signed_certificate((dir / "tls").string(), "127.0.0.1");
  EXPECT_EQ(tls.sha256.size(), 64u);
  // Reused, not remade, on the next start: the join string stays valid.
  EXPECT_EQ(ensure_self_signed_certificate((dir / "tls").string(), "127.0.0.1").sha256, tls.sha256);
  open_hub();
  publish(1);
  ServerOptions so;
  so.host = "127.0.0.1";
  EXPECT_EQ(default_tls(so, (dir / "unused").string()), "");  // loopback: plain HTTP
  so.tls_cert_path = tls.cert_path;
  so.tls_key_path = tls.key_path;
  HubServer tls_server(*hub, so);
  tls_server.start();
  const std::string join = hub_join_string(tls_server, so, "join-secret", tls.sha256);
  const auto parsed = net::parse_join_string(join);
  EXPECT_EQ(parsed.url, tls_server.url());
  EXPECT_EQ(parsed.token, "join-secret");
  EXPECT_EQ(parsed.sha256, tls.sha256);
  net::HttpClientOptions pinned = fast();
  pinned.pin_sha256 = parsed.sha256;
  net::HubClient good(parsed.url, pinned);
  EXPECT_FALSE(good.join(parsed.token, {}).worker_id.empty());
  EXPECT_EQ(good.version(std::nullopt, 1s).version.value_or(0), 1u);
  // Another certificate (a man in the middle would have one): refused, naming both prints.
  std::string wrong = tls.sha256;
  wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
  net::HttpClientOptions mismatched = fast();
  mismatched.pin_sha256 = wrong;
  net::HubClient bad(parsed.url, mismatched);
  try {
    bad.join(parsed.token, {});
    FAIL() << "joined a hub whose certificate does not match the pin";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity) << e.what();
    EXPECT_NE(std::string(e.what()).find(tls.sha256), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(wrong), std::string::npos) << e.what();
  }
  EXPECT_THROW(net::parse_join_string("https://h:1#token=t"), Error);  // https needs a pin
  EXPECT_THROW(net::parse_join_string("http://h:1"), Error);
}

TEST_F(Identity, OffLoopbackTheOperatorTokenIsRequired) {
  config.operator_token = "op-secret";
  serve("0.0.0.0");
  net::HubClient worker(server->url().replace(server->url().find("0.0.0.0"), 7, "127.0.0.1"),
                        fast());
  auto joined = worker.join("join-secret", {});
  for (const char* path : {"/v1/status", "/metrics", "/"}) {
    EXPECT_EQ(raw("GET", path, "", "")->status, 401) << path;
    EXPECT_EQ(raw("GET", path, "", joined.session_token)->status, 401) << path;
    EXPECT_EQ(raw("GET", path, "", "join-secret")->status, 401) << path;
    EXPECT_EQ(raw("GET", path, "", "op-secret")->status, 200) << path;
  }
  // Never the token in a URL (browser history keeps it): a browser logs in for a cookie
  // (operator_login_test.cpp); the page without one is the login form.
  auto page = raw("GET", "/?token=op-secret", "", "");
  EXPECT_EQ(page->status, 401);
  EXPECT_NE(page->body.find("<form method=\"post\" action=\"/login\">"), std::string::npos);
  EXPECT_EQ(raw("GET", "/v1/status?token=op-secret&limit=5", "", "")->status, 401);
}

TEST_F(HubFixture, WithoutAConfiguredOperatorTokenOneIsMadeOnce) {
  open_hub();
  const std::string file = hub->access().operator_token_file();
  ASSERT_FALSE(file.empty());
  std::ifstream in(file);
  std::string token;
  std::getline(in, token);
  EXPECT_EQ(token.size(), 32u);
  EXPECT_NO_THROW(hub->access().check_operator(token, false));
  EXPECT_THROW(hub->access().check_operator("join-secret", false), RequestError);
  EXPECT_NO_THROW(hub->access().check_operator("", true));  // loopback
  open_hub();                                               // a restart keeps it
  EXPECT_TRUE(hub->access().operator_token_file().empty());
  EXPECT_NO_THROW(hub->access().check_operator(token, false));
}

}  // namespace
}  // namespace stoa::hub::testing

namespace stoa::hub {
namespace {

TEST(RateLimiter, ABurstThenTheRateAndAWaitThatIsExact) {
  RateLimiter limiter({2, 3});  // 2 a second, 3 at once
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.acquire("a", 1000), 0);
  EXPECT_EQ(limiter.acquire("a", 1000), 500);  // the next token in half a second
  EXPECT_EQ(limiter.acquire("b", 1000), 0);    // keys are independent
  EXPECT_EQ(limiter.acquire("a", 1500), 0);
  EXPECT_GT(limiter.acquire("a", 1500), 0);
  EXPECT_EQ(RateLimiter({0, 1}).acquire("x", 0), 0);  // rate 0: unlimited
}

TEST(RateLimiter, AFloodOfKeysStaysBounded) {
  RateLimiter limiter({1, 1}, 100);
  for (int i = 0; i < 10'000; ++i) limiter.acquire("peer-" + std::to_string(i), i);
  EXPECT_LE(limiter.size(), 100u);
}

}  // namespace
}  // namespace stoa::hub
