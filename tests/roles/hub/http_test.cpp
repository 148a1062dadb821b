// The hub over real HTTP on a loopback port, driven by the worker's own client (HubClient) and
// by raw requests: malformed input gets 4xx JSON and never crashes, bad tokens are refused, a
// retried POST is counted once, blobs are served content-addressed with immutable caching.
#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "net/hub_client.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"
#include "support/self_signed_cert.h"

namespace stoa::hub::testing {
namespace {

class Http : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    config.lease_ttl_ms = 600'000;
    open_hub();
    publish(1);
    ServerOptions so;
    so.threads = 8;
    so.max_body_bytes = 1 << 20;
    serve(so);
  }
  net::HttpClientOptions fast() {
    net::HttpClientOptions o;
    o.backoff_base = std::chrono::milliseconds(5);
    o.max_attempts = 3;
    return o;
  }
  // A raw request with an arbitrary body and token; returns status and body.
  std::pair<int, std::string> raw_post(const std::string& path, const std::string& body,
                                       const std::string& token) {
    httplib::Client c("127.0.0.1", server->port());
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    auto r = c.Post(path.c_str(), h, body, "application/json");
    if (!r) return {0, ""};
    return {r->status, r->body};
  }
  std::pair<int, std::string> raw_get(const std::string& path, const std::string& token) {
    httplib::Client c("127.0.0.1", server->port());
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    auto r = c.Get(path.c_str(), h);
    if (!r) return {0, ""};
    return {r->status, r->body};
  }
  static void expect_json_error(const std::pair<int, std::string>& r, int status) {
    EXPECT_EQ(r.first, status) << r.second;
    auto j = nlohmann::json::parse(r.second, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.second;
    EXPECT_TRUE(j.contains("error") && j["error"].is_string()) << r.second;
  }
};

TEST_F(Http, AWorkerRoundTrip) {
  net::HubClient client(server->url(), fast());
  net::JoinRequest jr;
  jr.name = "laptop";
  auto joined = client.join("join-secret", jr);
  EXPECT_EQ(joined.vocab_size, 256);
  EXPECT_EQ(joined.task, "search");
  auto v = client.version(std::nullopt, std::chrono::seconds(1));
  EXPECT_EQ(v.version.value_or(0), 1u);
  auto lease = client.lease();
  ASSERT_TRUE(lease.lease.has_value());
  auto m = rollout(joined.worker_id, *lease.lease, "<answer>x</answer>", 1);
  auto r1 = client.submit(m);
  EXPECT_EQ(r1.status, net::IntakeStatus::kAccepted) << r1.detail;
  // The retry of a POST whose answer was lost: counted once.
  auto r2 = client.submit(m);
  EXPECT_EQ(r2.status, net::IntakeStatus::kDuplicate);
  EXPECT_EQ(hub->counters()["rollouts_accepted"], 1);
  // A rejection comes back as such (422), not as an exception.
  auto bad = m;
  bad.id = net::random_uuid();
  bad.logprobs.back() = 3.0f;
  auto r3 = client.submit(bad);
  EXPECT_EQ(r3.status, net::IntakeStatus::kRejected);
  EXPECT_EQ(r3.reason, "bad_logprob");
  net::Heartbeat hb;
  hb.worker_id = joined.worker_id;
  hb.leases = {lease.lease->lease_id};
  auto h = client.heartbeat(hb);
  EXPECT_EQ(h.renewed.size(), 1u);
  client.release(lease.lease->lease_id);
}

TEST_F(Http, LongPollWakesOnPublish) {
  net::HubClient client(server->url(), fast());
  client.join("join-secret", {});
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    publish(2);
  });
  auto start = std::chrono::steady_clock::now();
  auto v = client.version(1, std::chrono::seconds(20));
  t.join();
  EXPECT_EQ(v.version.value_or(0), 2u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(Http, BlobsAreContentAddressedAndImmutable) {
  std::vector<uint8_t> bytes = {1, 2, 3, 4, 5};
  Hash128 h = store->put(bytes);
  net::HubClient client(server->url(), fast());
  client.join("join-secret", {});
  EXPECT_EQ(client.blob(h.hex()), bytes);
  httplib::Client c("127.0.0.1", server->port());
  // Blobs need a session token too.
  auto unauth = c.Get(("/v1/blobs/" + h.hex()).c_str());
  ASSERT_TRUE(unauth);
  EXPECT_EQ(unauth->status, 401);
  std::string missing(32, 'a');
  EXPECT_THROW(client.blob(missing), Error);
  // Corrupt the file on the hub's disk: it must refuse to serve it, never send bad bytes.
  {
    std::ofstream f(store->path_of(h), std::ios::binary | std::ios::trunc);
    f << "evil!";
  }
  try {
    client.blob(h.hex());
    FAIL() << "served a corrupt blob";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNetwork) << e.what();
  }
}

TEST_F(Http, AWorkerFetchingABlobInALoopIsRefusedAndOthersAreNot) {
  // 512 KiB: the bucket is 4 blob sizes (2 MiB, above the 1 MiB floor).
  std::vector<uint8_t> bytes(512 << 10);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + 7);
  const Hash128 h = store->put(bytes);
  net::HubClient looping(server->url(), fast()), honest(server->url(), fast());
  const auto looper = looping.join("join-secret", {});
  honest.join("join-secret", {});
  httplib::Client c("127.0.0.1", server->port());
  const httplib::Headers auth = {{"Authorization", "Bearer " + looper.session_token}};
  const std::string path = "/v1/blobs/" + h.hex();
  for (int i = 0; i < 3; ++i) {
    auto r = c.Get(path.c_str(), auth);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << "fetch " << i;
  }
  // Charged by the range, not by the request: the second half, then the first half, fit.
  for (const char* range : {"bytes=262144-", "bytes=0-262143"}) {
    httplib::Headers ranged = auth;
    ranged.emplace("Range", range);
    auto r = c.Get(path.c_str(), ranged);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 206) << range;
  }
  auto refused = c.Get(path.c_str(), auth);
  ASSERT_TRUE(refused);
  expect_json_error({refused->status, refused->body}, 429);
  EXPECT_GE(std::stoi(refused->get_header_value("Retry-After")), 1);
  EXPECT_NE(refused->body.find("fetches_per_blob"), std::string::npos) << refused->body;
  EXPECT_EQ(honest.blob(h.hex()), bytes) << "another worker still gets the blob";
  const auto status = nlohmann::json::parse(raw_get("/v1/status", "").second);
  EXPECT_EQ(status["fetch_allowance"]["refusals"], 1);
  EXPECT_EQ(status["fetch_allowance"]["refused_bytes"], bytes.size());
}

TEST_F(Http, CachingHeaders) {
  std::vector<uint8_t> bytes = {9, 9, 9};
  Hash128 h = store->put(bytes);
  net::HubClient client(server->url(), fast());
  auto joined = client.join("join-secret", {});
  httplib::Client c("127.0.0.1", server->port());
  auto r = c.Get(("/v1/blobs/" + h.hex()).c_str(),
                 {{"Authorization", "Bearer " + joined.session_token}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Cache-Control").find("immutable"), std::string::npos);
  EXPECT_EQ(r->get_header_value("ETag"), "\"" + h.hex() + "\"");
}

TEST_F(Http, BadTokensAreRefused) {
  expect_json_error(raw_post("/v1/join", R"({"protocol":1})", "wrong"), 401);
  expect_json_error(raw_post("/v1/join", R"({"protocol":1})", ""), 401);
  expect_json_error(raw_post("/v1/lease", R"({"worker_id":"w-x"})", "nope"), 401);
  expect_json_error(raw_get("/v1/version?timeout=0", ""), 401);
  // The join token is not a session token.
  expect_json_error(raw_post("/v1/lease", R"({"worker_id":"w-x"})", "join-secret"), 401);
  net::HubClient client(server->url(), fast());
  try {
    client.join("wrong", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("401"), std::string::npos) << e.what();
  }
}

TEST_F(Http, MalformedRequestsGet4xxJsonAndNeverCrash) {
  net::HubClient client(server->url(), fast());
  auto joined = client.join("join-secret", {});
  const std::string tok = joined.session_token;
  const std::vector<std::string> bodies = {
      "",
      "{",
      "null",
      "[]",
      "42",
      "\"str\"",
      "{\"worker_id\":5}",
      "{\"worker_id\":null}",
      std::string("{\"a\":\"\xff\xfe\"}"),
      std::string(1000, '['),
      "{\"id\":\"x\"}",
      R"({"id":"00000000-0000-4000-8000-000000000000","worker_id":"w","lease_id":"l",
          "group_id":"g","prompt_id":"p","tokens":[1,2],"mask":[0],"logprobs":[0],
          "versions":[1]})",
      R"({"id":"00000000-0000-4000-8000-000000000000","worker_id":"w","lease_id":"l",
          "group_id":"g","prompt_id":"p","tokens":[1e99],"mask":[1],"logprobs":[0],
          "versions":[1]})",
      R"({"id":"00000000-0000-4000-8000-000000000000","worker_id":"w","lease_id":"l",
          "group_id":"g","prompt_id":"p","tokens":[1],"mask":[7],"logprobs":[0],
          "versions":[-1]})"};
  for (const char* path :
       {"/v1/join", "/v1/lease", "/v1/release", "/v1/rollouts", "/v1/heartbeat"}) {
    for (const auto& b : bodies) {
      auto r = raw_post(path, b, std::string(path) == "/v1/join" ? "join-secret" : tok);
      EXPECT_GE(r.first, 400) << path << " " << b.substr(0, 60);
      EXPECT_LT(r.first, 500) << path << " " << b.substr(0, 60) << " -> " << r.second;
      auto j = nlohmann::json::parse(r.second, nullptr, false);
      EXPECT_TRUE(j.is_object() && j.contains("error")) << path << " -> " << r.second;
    }
  }
  expect_json_error(raw_get("/v1/version?after=abc", tok), 400);
  expect_json_error(raw_get("/v1/version?after=-1", tok), 400);
  expect_json_error(raw_get("/v1/version?after=99999999999999999999999", tok), 400);
  expect_json_error(raw_get("/v1/blobs/zz", tok), 400);
  expect_json_error(raw_get("/v1/blobs/" + std::string(32, 'g'), tok), 400);
  expect_json_error(raw_get("/v1/nothing", tok), 404);
  // A body over the limit.
  auto big = raw_post("/v1/rollouts", std::string(2 << 20, ' '), tok);
  EXPECT_EQ(big.first, 413);
  // Someone else's worker id.
  expect_json_error(raw_post("/v1/lease", R"({"worker_id":"w-someone"})", tok), 403);
  // Still alive and well.
  auto st = raw_get("/v1/status", "");
  EXPECT_EQ(st.first, 200);
  EXPECT_TRUE(nlohmann::json::parse(st.second)["protocol"] == 1);
}

TEST_F(Http, StatusMetricsAndDashboard) {
  auto st = raw_get("/v1/status", "");
  EXPECT_EQ(st.first, 200);
  auto m = raw_get("/metrics", "");
  EXPECT_EQ(m.first, 200);
  EXPECT_NE(m.second.find("# TYPE stoa_latest_version gauge"), std::string::npos);
  EXPECT_NE(m.second.find("stoa_latest_version 1"), std::string::npos);
  EXPECT_NE(m.second.find("stoa_step_seconds_histogram_count 0"), std::string::npos) << m.second;
  // Per-worker series carry the worker's id and the name it joined with.
  const std::string id = join("dash-w");
  m = raw_get("/metrics", "");
  EXPECT_NE(m.second.find("stoa_worker_tokens_per_second{worker=\"" + id + "\",name=\"dash-w\"}"),
            std::string::npos)
      << m.second;
  auto d = raw_get("/", "");
  EXPECT_EQ(d.first, 200);
  EXPECT_NE(d.second.find("/v1/status"), std::string::npos);
}

TEST_F(Http, ClientRetriesIdempotentCallsAndGivesUp) {
  // Nothing listens on this port: transport errors, retried max_attempts times, then kNetwork.
  int port = server->port();
  server.reset();
  net::HttpClientOptions o = fast();
  o.max_attempts = 3;
  o.connect_timeout = std::chrono::milliseconds(200);
  net::HttpClient c("http://127.0.0.1:" + std::to_string(port), o);
  int retries = 0;
  c.on_retry([&](int, const std::string&) { ++retries; });
  try {
    c.get("/v1/status");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNetwork);
  }
  EXPECT_EQ(retries, 2);
  retries = 0;
  EXPECT_THROW(c.post_json("/v1/lease", "{}", /*idempotent=*/false), Error);
  EXPECT_EQ(retries, 0);
}

}  // namespace
}  // namespace stoa::hub::testing

namespace stoa::hub::testing {
namespace {

TEST_F(HubFixture, ServesHttpsWithAConfiguredCertificate) {
  auto cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  if (!stoa::test::make_self_signed_cert(cert, key)) GTEST_SKIP() << "openssl CLI unavailable";
  open_hub();
  publish(1);
  ServerOptions so;
  so.tls_cert_path = cert;
  so.tls_key_path = key;
  HubServer server(*hub, so);
  server.start();
  ASSERT_TRUE(server.tls());
  EXPECT_EQ(server.url().rfind("https://", 0), 0u);
  net::HttpClientOptions o;
  o.ca_cert_path = cert;  // trust exactly this certificate
  net::HubClient client(server.url(), o);
  auto joined = client.join("join-secret", {});
  EXPECT_FALSE(joined.worker_id.empty());
  EXPECT_EQ(client.version(std::nullopt, std::chrono::seconds(1)).version.value_or(0), 1u);
  // A client that does not trust the certificate is refused by the TLS handshake.
  net::HttpClientOptions strict;
  strict.max_attempts = 1;
  net::HubClient untrusting(server.url(), strict);
  EXPECT_THROW(untrusting.join("join-secret", {}), Error);
  // A certificate path that does not exist is a clear error, not a half-started server.
  ServerOptions bad = so;
  bad.tls_cert_path = (dir / "missing.pem").string();
  EXPECT_THROW(HubServer(*hub, bad), Error);
}

}  // namespace
}  // namespace stoa::hub::testing
