// Every way joining can fail that can be produced on one machine, against the real hub (in
// process, over real HTTP(S)), and what `stoa work` then tells the volunteer
// (roles/worker/failure_advice.h): each failure is classified and its words name the cause and
// what to do. The catalogue is docs/volunteer.md.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "model/config.h"
#include "net/hub_client.h"
#include "net/join_string.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"
#include "roles/hub/identity/tls_identity.h"
#include "roles/hub/verification/rollout_audit.h"
#include "roles/worker/failure_advice.h"
#include "roles/worker/heartbeat.h"
#include "roles/worker/join.h"
#include "roles/worker/lease_book.h"
#include "roles/worker/memory_check.h"
#include "roles/worker/weight_sync.h"
#include "roles/worker/worker.h"
#include "support/loopback_socket.h"

namespace stoa::hub::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using worker::FailureKind;

// The validator's queue, kept for the test to give its verdicts itself.
struct CollectingAuditor : RolloutAuditor {
  std::vector<AuditJob> jobs;
  bool enqueue(AuditJob job) override {
    jobs.push_back(std::move(job));
    return true;
  }
};

class JoinFailure : public HubFixture {
 protected:
  void start(bool tls = false) {
    open_hub();
    ServerOptions so;
    so.threads = 4;
    if (tls) {
      const TlsIdentity id = ensure_self_signed_certificate((dir / "tls").string(), "127.0.0.1");
      so.tls_cert_path = id.cert_path;
      so.tls_key_path = id.key_path;
      fingerprint = id.sha256;
    }
    serve(so);
  }
  static net::HttpClientOptions quick() {
    net::HttpClientOptions o;
    o.connect_timeout = 1000ms;
    o.read_timeout = 1000ms;
    o.max_attempts = 1;
    return o;
  }
  // What `stoa work` would say about joining `url` with `options`.
  worker::FailureAdvice join_advice(const std::string& url, net::HttpClientOptions options,
                                    const std::string& token = "join-secret") {
    std::atomic<bool> stop{false};
    try {
      net::HubClient client(url, std::move(options));
      worker::join_hub(client, token, "volunteer", 1, (dir / "state").string(), 0, stop);
    } catch (const std::exception& e) {
      return worker::advise(e, url);
    }
    ADD_FAILURE() << "joining " << url << " did not fail";
    return {};
  }
  // A model dir for run_worker: a small Qwen3 config.json (byte-level: no tokenizer.json, as its
  // config says — a model without a tokenizer that does not say so is refused).
  std::string model_dir(int64_t vocab) {
    ModelConfig c;
    c.vocab_size = vocab;
    c.byte_tokens = true;
    c.hidden_size = 64;
    c.intermediate_size = 128;
    c.num_layers = 1;
    c.num_heads = 2;
    c.num_kv_heads = 1;
    c.head_dim = 32;
    c.layer_kinds = {LayerKind::kAttention};
    const fs::path d = dir / ("model-" + std::to_string(vocab));
    fs::create_directories(d);
    std::ofstream(d / "config.json") << model_config_to_json(c).dump();
    return d.string();
  }
  worker::FailureAdvice run_worker_advice(worker::WorkerOptions o) {
    std::atomic<bool> stop{false};
    o.state_dir = (dir / "worker-state").string();
    o.threads = 1;
    o.join_timeout_s = 1;
    o.progress = false;
    try {
      worker::run_worker(o, stop);
    } catch (const std::exception& e) {
      return worker::advise(e, o.hub_url);
    }
    ADD_FAILURE() << "run_worker did not fail";
    return {};
  }
  static std::string text(const worker::FailureAdvice& a) { return worker::format_advice(a); }

  std::string fingerprint;
};

TEST_F(JoinFailure, AMalformedJoinStringSaysHowToCopyIt) {
  for (const char* bad : {"https://hub.example:8443", "https://hub.example:8443#token=abc",
                          "ftp://hub#token=abc", "https://hub:1#token=a&sha256=xyz"}) {
    try {
      net::parse_join_string(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const std::exception& e) {
      const auto a = worker::advise(e, "");
      EXPECT_EQ(a.kind, FailureKind::kMalformedJoinString) << bad << ": " << text(a);
      EXPECT_NE(text(a).find("single quotes"), std::string::npos) << text(a);
    }
  }
  try {  // a pin that is not 64 hex digits, given to the client directly
    net::HttpClientOptions o;
    o.pin_sha256 = "not-a-fingerprint";
    net::HttpClient client("https://127.0.0.1:1", o);
    ADD_FAILURE() << "a bad pin was accepted";
  } catch (const std::exception& e) {
    EXPECT_EQ(worker::advise(e, "").kind, FailureKind::kMalformedJoinString) << e.what();
  }
}

TEST_F(JoinFailure, AnUnknownHostANameThatDoesNotResolve) {
  const auto a = join_advice("http://no-such-hub.invalid:8443", quick());
  EXPECT_EQ(a.kind, FailureKind::kHostNotFound) << text(a);
  EXPECT_NE(text(a).find("'no-such-hub.invalid' could not be found"), std::string::npos) << text(a);
}

TEST_F(JoinFailure, NothingListeningIsARefusedConnection) {
  // A port that was free a moment ago: nothing listens there.
  const stoa::test::LoopbackSocket bound = stoa::test::bind_loopback(/*backlog=*/0);
  ::close(bound.fd);
  const std::string url = "http://127.0.0.1:" + std::to_string(bound.port);
  const auto a = join_advice(url, quick());
  EXPECT_EQ(a.kind, FailureKind::kConnectionRefused) << text(a);
  EXPECT_NE(text(a).find("the hub is not running"), std::string::npos) << text(a);
}

TEST_F(JoinFailure, AHubThatNeverAnswersIsATimeout) {
  // Listening (the kernel completes the handshake) but never accepting nor answering.
  const stoa::test::LoopbackSocket listening = stoa::test::bind_loopback(/*backlog=*/4);
  auto o = quick();
  o.read_timeout = 300ms;
  const auto a = join_advice("http://127.0.0.1:" + std::to_string(listening.port), o);
  ::close(listening.fd);
  EXPECT_EQ(a.kind, FailureKind::kTimeout) << text(a);
  EXPECT_NE(text(a).find("did not answer in time"), std::string::npos) << text(a);
}

TEST_F(JoinFailure, ACertificateThatIsNotThePinnedOneMeansInterceptionOrANewCertificate) {
  start(/*tls=*/true);
  auto o = quick();
  o.pin_sha256 = std::string(64, 'a');  // not the hub's
  const auto a = join_advice(server->url(), o);
  EXPECT_EQ(a.kind, FailureKind::kPinMismatch) << text(a);
  for (const char* words : {"different TLS certificate", "intercepting", "new certificate",
                            "new join string", "Nothing was sent"})
    EXPECT_NE(text(a).find(words), std::string::npos) << words << "\n" << text(a);
  // The right pin joins.
  o.pin_sha256 = fingerprint;
  std::atomic<bool> stop{false};
  net::HubClient client(server->url(), o);
  EXPECT_FALSE(worker::join_hub(client, "join-secret", "v", 1, (dir / "ok").string(), 0, stop)
                   .worker_id.empty());
}

TEST_F(JoinFailure, AnHttpsJoinStringForAPlainHttpHubFailsTheHandshake) {
  start();
  auto o = quick();
  o.pin_sha256 = std::string(64, 'a');
  std::string url = server->url();
  url.replace(0, 4, "https");
  const auto a = join_advice(url, o);
  EXPECT_EQ(a.kind, FailureKind::kTlsFailed) << text(a);
}

TEST_F(JoinFailure, AnUnknownOrRevokedTokenAsksForANewJoinString) {
  start();
  const auto a = join_advice(server->url(), quick(), "not-the-token");
  EXPECT_EQ(a.kind, FailureKind::kTokenRefused) << text(a);
  EXPECT_NE(text(a).find("revoked"), std::string::npos) << text(a);
  EXPECT_NE(text(a).find("new join string"), std::string::npos) << text(a);
}

TEST_F(JoinFailure, RateLimitedPastTheJoinTimeout) {
  config.limits.join_per_ip = {0.001, 1};  // one join, then a wait of ~1000 s
  start();
  std::atomic<bool> stop{false};
  net::HubClient first(server->url(), quick());
  worker::join_hub(first, "join-secret", "a", 1, (dir / "a").string(), 0, stop);
  auto o = quick();
  o.max_retry_after = 10ms;  // the client waits out each 429 this long at most
  std::vector<std::string> retries;
  try {
    net::HubClient second(server->url(), o);
    worker::join_hub(second, "join-secret", "b", 1, (dir / "b").string(), 1, stop,
                     [&](const std::exception& why) { retries.push_back(why.what()); });
    ADD_FAILURE() << "the second join was not rate limited";
  } catch (const std::exception& e) {
    const auto a = worker::advise(e, server->url());
    EXPECT_EQ(a.kind, FailureKind::kRateLimited) << text(a);
    EXPECT_NE(text(a).find("too many joins"), std::string::npos) << text(a);
  }
  // A 429 is waited out and retried within the join timeout, not taken as a refusal.
  ASSERT_FALSE(retries.empty());
  EXPECT_NE(retries.front().find("rate limit"), std::string::npos) << retries.front();
}

TEST_F(JoinFailure, AnotherProtocolVersionSaysToMatchTheHubsRelease) {
  start();
  net::HubClient client(server->url(), quick());
  net::JoinRequest r;
  r.protocol = net::kProtocolVersion + 1;
  try {
    client.join("join-secret", r);
    ADD_FAILURE() << "a join with protocol " << r.protocol << " was accepted";
  } catch (const std::exception& e) {
    const auto a = worker::advise(e, server->url());
    EXPECT_EQ(a.kind, FailureKind::kVersionMismatch) << text(a);
    EXPECT_NE(text(a).find("same release as the hub"), std::string::npos) << text(a);
  }
}

TEST_F(JoinFailure, AQuarantinedWorkerIsStoppedWithTheReason) {
  config.verify.fraction = 1.0;
  start();
  CollectingAuditor auditor;
  hub->checks().set_auditor(&auditor);
  publish(1);
  net::HubClient client(server->url(), quick());
  std::atomic<bool> stop{false};
  const auto joined =
      worker::join_hub(client, "join-secret", "v", 1, (dir / "q").string(), 0, stop);
  const net::LeaseResponse lr = client.lease();
  ASSERT_TRUE(lr.lease);
  net::RolloutSubmission m = rollout(joined.worker_id, *lr.lease, "<answer>migraine</answer>", 1);
  ASSERT_FALSE(lr.lease->seeds.empty());
  m.seed = lr.lease->seeds[0];
  const net::RolloutResponse answer = client.submit(m);
  ASSERT_EQ(answer.status, net::IntakeStatus::kAccepted) << answer.reason << " " << answer.detail;
  ASSERT_EQ(auditor.jobs.size(), 1u);
  AuditVerdict failed;
  failed.position = 3;
  failed.what = "logprob";
  hub->checks().record_verdict(m.id, failed);
  // The worker's heartbeat thread hears the 403 and raises the worker's fatal reason.
  worker::LeaseBook book;
  worker::WorkerGauges gauges;
  {
    const std::jthread beat([&](std::stop_token beating) {
      worker::run_heartbeat(client, joined.worker_id, 2, book, gauges, beating);
    });
    for (int i = 0; i < 50 && !gauges.fatal.get(); ++i) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(gauges.fatal.get());
  const auto a = worker::advise(Error(ErrorKind::kIntegrity, *gauges.fatal.get()), server->url());
  EXPECT_EQ(a.kind, FailureKind::kQuarantined) << text(a);
  EXPECT_NE(text(a).find("did not reproduce"), std::string::npos) << text(a);
  EXPECT_NE(text(a).find(joined.worker_id), std::string::npos) << text(a);
  hub->checks().set_auditor(nullptr);  // the auditor goes before the hub
}

// The run is over (its trainer reached max_steps): the next lease and heartbeat say so, and the
// hub knows when every worker it heard from lately has been told.
TEST_F(JoinFailure, TheEndOfTheRunReachesTheWorkerByLeaseAndHeartbeat) {
  start();
  publish(1);
  net::HubClient client(server->url(), quick());
  std::atomic<bool> stop{false};
  const auto joined =
      worker::join_hub(client, "join-secret", "v", 1, (dir / "e").string(), 0, stop);
  worker::WorkerGauges gauges;
  int64_t retry_ms = 0;
  EXPECT_TRUE(worker::lease_group(client, 1 << 20, &retry_ms, gauges.hub, gauges.run_ended));
  EXPECT_FALSE(gauges.run_ended);
  EXPECT_EQ(hub->workers_not_told_of_end(60'000), 1u);
  hub->end_run();
  EXPECT_FALSE(worker::lease_group(client, 1 << 20, &retry_ms, gauges.hub, gauges.run_ended));
  EXPECT_TRUE(gauges.run_ended) << "a lease answer did not say the run is over";
  EXPECT_EQ(hub->workers_not_told_of_end(60'000), 0u);
  gauges.run_ended = false;
  worker::LeaseBook book;
  {
    const std::jthread beat([&](std::stop_token beating) {
      worker::run_heartbeat(client, joined.worker_id, 2, book, gauges, beating);
    });
    for (int i = 0; i < 50 && !gauges.run_ended; ++i) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(gauges.run_ended) << "a heartbeat answer did not say the run is over";
  EXPECT_FALSE(gauges.fatal.get());
}

// A hub gone away: lease asks again less often as the outage lasts, and the contact says so
// once (the report's line) instead of a warning every 2 s.
TEST_F(JoinFailure, AnUnreachableHubIsAskedLessOftenAsItLasts) {
  const stoa::test::LoopbackSocket bound = stoa::test::bind_loopback(/*backlog=*/0);
  ::close(bound.fd);  // a port that was free a moment ago: nothing listens there
  net::HubClient client("http://127.0.0.1:" + std::to_string(bound.port), quick());
  worker::WorkerGauges gauges;
  std::vector<int64_t> retries;
  for (int i = 0; i < 6; ++i) {
    int64_t retry_ms = 0;
    EXPECT_FALSE(worker::lease_group(client, 1 << 20, &retry_ms, gauges.hub, gauges.run_ended));
    retries.push_back(retry_ms);
  }
  EXPECT_FALSE(gauges.hub.state().reachable);
  EXPECT_FALSE(gauges.run_ended);
  EXPECT_GT(retries.back(), retries.front());
  EXPECT_EQ(retries.back(), 30000);
}

TEST_F(JoinFailure, AModelDirForAnotherModelIsRefusedAfterTheJoin) {
  start();
  worker::WorkerOptions o;
  o.hub_url = server->url();
  o.join_token = "join-secret";
  o.model_dir = model_dir(512);  // the hub's vocabulary has 256 tokens
  const auto a = run_worker_advice(o);
  EXPECT_EQ(a.kind, FailureKind::kModelMismatch) << text(a);
  EXPECT_NE(text(a).find("config.json and tokenizer.json from the operator"), std::string::npos)
      << text(a);
}

TEST_F(JoinFailure, NotEnoughMemoryIsRefusedBeforeAnyDownloadWithTheFigures) {
  start();
  worker::WorkerOptions o;
  o.hub_url = server->url();
  o.join_token = "join-secret";
  o.model_dir = model_dir(256);
  o.max_memory_mb = 1;  // the volunteer's own cap
  const auto a = run_worker_advice(o);
  EXPECT_EQ(a.kind, FailureKind::kNotEnoughMemory) << text(a);
  for (const char* words : {"needs about", "of int8 weights", "1.0 MB is available"})
    EXPECT_NE(text(a).find(words), std::string::npos) << words << "\n" << text(a);
  EXPECT_EQ(hub->workers().size(), 0u) << "the worker joined before refusing";
  // The figures: the weights are one byte per parameter, the margin at least 512 MiB.
  const auto need = memory_needed(load_model_config(o.model_dir + "/config.json"));
  EXPECT_GT(need.weights_bytes, 30'000u);
  EXPECT_EQ(need.margin_bytes, 512ull << 20);
  EXPECT_LE(worker::memory_available(1'000'000).value_or(0), 1'000'000u);
}

TEST_F(JoinFailure, AFullDiskInTheSpoolDirPausesTheDownloadWithWhatToDo) {
  start();
  std::vector<uint8_t> bytes(1 << 16, 7);
  const Hash128 h = store->put(bytes);
  net::HubClient client(server->url(), quick());
  client.join("join-secret", {});
  const fs::path spool = dir / "full-disk";
  fs::create_directories(spool);
  // Every write to /dev/full fails with ENOSPC: a full disk, for real, at the spool file.
  fs::create_symlink("/dev/full", spool / (h.hex() + ".blob"));
  worker::HubBlobSource source(client, spool.string());
  try {
    source.blob_file(h.hex());
    ADD_FAILURE() << "the download into /dev/full succeeded";
  } catch (const std::exception& e) {
    const auto a = worker::advise(e, server->url());
    EXPECT_EQ(a.kind, FailureKind::kDiskFull) << text(a);
    EXPECT_NE(text(a).find("--state-dir"), std::string::npos) << text(a);
    EXPECT_NE(text(a).find("disk full"), std::string::npos) << text(a);
  }
}

}  // namespace
}  // namespace stoa::hub::testing
