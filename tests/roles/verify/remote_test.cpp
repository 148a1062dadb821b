// Remote validation (docs/design/verification.md, docs/protocol.md "Validation"): a real Hub behind
// its HTTP server hands replay jobs to a real `stoa validate` process (the built binary), which
// rebuilds the versions from the hub's PULSE blobs over HTTP and replays them. Honest rollouts
// pass, a forged one fails and its worker is quarantined. The validation routes themselves: a
// lease that runs out puts the job back (its old id is refused), a long-poll wakes when a job
// arrives, and bad verdicts, unknown jobs and wrong tokens are refused with clear statuses. A hub
// restarted on its ledger keeps its quarantine and the seeds its leases used.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/process.h"
#include "engine/engine_test_util.h"
#include "env/env_test_util.h"
#include "env/tasks/builtin_tasks.h"
#include "env/tasks/search/bm25_index.h"
#include "env/token_codec.h"
#include "gpu/engine_backend_choice.h"
#include "model/weights.h"
#include "net/http_client.h"
#include "pulse/model_view.h"
#include "pulse/publisher.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub.h"
#include "roles/hub/verification/validation_queue.h"
#include "roles/verify/replay_hub_setup.h"
#include "roles/verify/replay_validator.h"
#include "roles/verify/test_worker.h"

namespace stoa::verify {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kOperatorToken = "operator-secret";

struct Worker {
  std::string id;
  std::string token;
};

class RemoteValidationTest : public ::testing::Test {
 protected:
  void start(int64_t job_lease_ms) {
    dir = std::make_unique<env::testing::TempDir>("verify_remote");
    env::build_bm25_index(env::testing::small_corpus(), *dir / "index");
    // The task exactly as `stoa run` and `stoa validate` build it.
    task = env::make_task("search", {{"index", *dir / "index"}});
    store = std::make_unique<pulse::BlobStore>(*dir / "blobs");
    ModelWeights w1 = engine::testing::tiny_model("tiny-lfm2", 7);
    const ModelWeights w2 = engine::testing::tiny_model("tiny-lfm2", 8);
    // The validator reads its config.json: a model of byte tokens, as its config says.
    w1.config.byte_tokens = true;
    config = w1.config;
    save_model_dir(w1, *dir / "model");
    pulse::Int8Quantizer quantizer;
    v1 = pulse::int8_view_of(w1, 1, &quantizer);
    v2 = pulse::int8_view_of(w2, 2, &quantizer);

    hc.ledger_path = *dir / "ledger.sqlite";
    testing::set_replay_test_hub(hc);
    hc.operator_token = kOperatorToken;
    hc.verify.remote = true;
    deps.task = task.get();
    deps.codec = &codec;
    deps.vocab_size = config.vocab_size;
    deps.prompts = testing::replay_test_prompts(2);
    prompts = deps.prompts;
    deps.store = store.get();
    hub = std::make_unique<hub::Hub>(hc, deps);
    pulse::Publisher publisher(*store, {});
    for (const pulse::Int8State* s : {&v1, &v2})
      hub->publish_version(publisher.publish(*s), s->state_hash());
    queue = std::make_unique<hub::ValidationQueue>(hc.verify.max_queue, job_lease_ms);
    serve();

    gs.config = &config;
    gs.task = task.get();
    gs.codec = &codec;
    gs.max_tokens = hc.max_tokens;
    gs.sample_vocab = 256;
    gs.eos = static_cast<int32_t>(config.eos_token_id);
  }
  void serve() {
    hub->checks().set_auditor(queue.get());
    server = std::make_unique<hub::HubServer>(*hub, hub::ServerOptions{});
    server->set_validation_queue(queue.get());
    server->start();
  }
  // A new hub process on the same ledger and blobs (the queue, in memory, is the new one's too).
  void restart_hub() {
    server.reset();
    hub.reset();
    hub = std::make_unique<hub::Hub>(hc, deps);
    serve();
  }
  void TearDown() override {
    if (queue) queue->stop();
    server.reset();
    hub.reset();
  }

  Worker join(const std::string& name) {
    net::JoinRequest r;
    r.name = name;
    const net::JoinResponse j = hub->join("join-secret", r);
    return {j.worker_id, j.session_token};
  }
  // One leased group generated honestly (prompt under version 1, a switch to 2 after one step).
  std::vector<net::RolloutSubmission> generate_group(const Worker& w) {
    const net::Lease l = *hub->lease(w.id).lease;
    const env::QaItem* problem = nullptr;
    for (const auto& q : prompts)
      if (q.id == l.prompt_id) problem = &q;
    return testing::generate_lease(gs, l, *problem, w.id, v1, &v2, 1);
  }
  void submit_all(const Worker& w, const std::vector<net::RolloutSubmission>& rollouts) {
    for (const auto& m : rollouts) {
      const auto r = hub->submit(w.id, m);
      ASSERT_EQ(r.status, net::IntakeStatus::kAccepted) << r.reason << ": " << r.detail;
    }
  }
  double counter(const std::string& key) const {
    const auto c = hub->counters();
    auto it = c.find(key);
    return it == c.end() ? 0 : it->second;
  }
  // A validation call with `token` ("" : none).
  net::HttpResponse call(const std::string& path, const json& body,
                         const std::string& token = kOperatorToken) {
    net::HttpClient http(server->url());
    if (!token.empty()) http.set_bearer_token(token);
    return http.post_json(path, body.dump(), false, 30s);
  }
  Process validate(const std::vector<std::string>& extra) {
    const char* binary = std::getenv("STOA_BINARY");
    EXPECT_NE(binary, nullptr) << "STOA_BINARY (the built stoa) is not set";
    std::vector<std::string> argv = {binary ? binary : "stoa",
                                     "validate",
                                     "--hub",
                                     server->url(),
                                     "--model",
                                     *dir / "model",
                                     "--index",
                                     *dir / "index",
                                     "--state-dir",
                                     *dir / "validator",
                                     "--wait",
                                     "2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ProcessOptions po;
    po.out = OutputTarget::capture();
    po.err = OutputTarget::capture();
    po.die_with_parent = true;
    return Process::start(argv, po);
  }

  std::unique_ptr<env::testing::TempDir> dir;
  std::unique_ptr<env::Task> task;
  env::ByteCodec codec;
  std::unique_ptr<pulse::BlobStore> store;
  ModelConfig config;
  pulse::Int8State v1, v2;
  std::vector<env::QaItem> prompts;
  hub::HubConfig hc;
  hub::HubDeps deps;
  std::unique_ptr<hub::Hub> hub;
  std::unique_ptr<hub::ValidationQueue> queue;
  std::unique_ptr<hub::HubServer> server;
  testing::GenerateSettings gs;
};

TEST_F(RemoteValidationTest, ValidateProcessPassesHonestRolloutsAndQuarantinesAForger) {
  start(60'000);
  const Worker honest = join("honest");
  for (int g = 0; g < 2; ++g) submit_all(honest, generate_group(honest));
  const Worker forger = join("forger");
  auto forged = generate_group(forger);
  net::RolloutSubmission& m = forged.at(0);
  // The third sampled token's log-prob, one ulp off. Counted over the trained positions: the
  // first span of sampled tokens can be shorter than three (a tool call after two tokens), and a
  // change to an observation's log-prob is no forgery (it was seen once under load).
  std::vector<size_t> sampled;
  for (size_t t = 0; t < m.mask.size(); ++t) {
    if (m.mask[t]) sampled.push_back(t);
  }
  ASSERT_FALSE(sampled.empty());
  const size_t p = sampled[std::min<size_t>(2, sampled.size() - 1)];
  m.logprobs[p] = std::nextafter(m.logprobs[p], -INFINITY);  // one ulp
  // Every rollout is in before the validator starts: a quarantine cannot land mid-group.
  submit_all(forger, forged);
  ASSERT_EQ(queue->stats().queued, 6u);

  Process v = validate({"--token", kOperatorToken, "--max-jobs", "6", "--name", "it"});
  const auto code = v.wait_for(60s);
  ASSERT_TRUE(code.has_value()) << "stoa validate did not finish";
  ASSERT_EQ(*code, 0) << v.captured_err();
  const json summary = json::parse(v.captured_out());
  EXPECT_EQ(summary["verdicts"], 6) << v.captured_err();
  EXPECT_EQ(summary["failed"], 1) << v.captured_err();

  EXPECT_EQ(counter("rollouts_verified"), 6);
  EXPECT_EQ(counter("verification_failures"), 1);
  EXPECT_EQ(counter("workers_quarantined"), 1);
  EXPECT_TRUE(hub->checks().quarantined(forger.id));
  EXPECT_FALSE(hub->checks().quarantined(honest.id));
  testing::expect_session_refused(*hub, forger.token,
                                  "the quarantined worker's session was accepted");
  EXPECT_NE(v.captured_err().find("FAILED replay at position " + std::to_string(p)),
            std::string::npos)
      << v.captured_err();

  // A validator with a token that is not the operator's is refused and exits 3.
  Process refused = validate({"--token", "not-the-token"});
  const auto refused_code = refused.wait_for(30s);
  ASSERT_TRUE(refused_code.has_value());
  EXPECT_EQ(*refused_code, 3) << refused.captured_err();
}

// `stoa validate --backend vulkan` (lavapipe in CI): the replays computed on the GPU backend give
// the CPU's verdicts bit for bit, a one-ulp forgery included.
TEST_F(RemoteValidationTest, ValidateOnAVulkanDeviceGivesTheSameVerdicts) {
  if (!gpu::vulkan_built()) GTEST_SKIP() << "this build has no Vulkan backend";
  start(60'000);
  const Worker honest = join("honest");
  for (int g = 0; g < 2; ++g) submit_all(honest, generate_group(honest));
  const Worker forger = join("forger");
  auto forged = generate_group(forger);
  net::RolloutSubmission& m = forged.at(0);
  size_t p = 0;
  for (size_t t = 0; t < m.mask.size() && p == 0; ++t)
    if (m.mask[t]) p = t;
  ASSERT_GT(p, 0u);
  m.logprobs[p] = std::nextafter(m.logprobs[p], -INFINITY);  // one ulp
  submit_all(forger, forged);
  ASSERT_EQ(queue->stats().queued, 6u);
  Process v = validate(
      {"--token", kOperatorToken, "--max-jobs", "6", "--name", "gpu", "--backend", "vulkan"});
  const auto code = v.wait_for(120s);
  ASSERT_TRUE(code.has_value()) << "stoa validate did not finish";
  ASSERT_EQ(*code, 0) << v.captured_err();
  const json summary = json::parse(v.captured_out());
  EXPECT_EQ(summary["verdicts"], 6) << v.captured_err();
  EXPECT_EQ(summary["failed"], 1) << v.captured_err();
  EXPECT_TRUE(hub->checks().quarantined(forger.id));
  EXPECT_FALSE(hub->checks().quarantined(honest.id));
  EXPECT_NE(v.captured_err().find("FAILED replay at position " + std::to_string(p)),
            std::string::npos)
      << v.captured_err();
}

TEST_F(RemoteValidationTest, ExpiredLeasesRequeueAndBadVerdictsAreRefused) {
  start(1500);
  const Worker w = join("w");
  // A parked long-poll wakes when a job is queued.
  auto parked = std::async(std::launch::async, [&] {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r =
        call("/v1/validation/lease", {{"validator", "a"}, {"wait_s", 20}, {"arithmetic", 2}});
    return std::make_pair(r, std::chrono::steady_clock::now() - t0);
  });
  std::this_thread::sleep_for(200ms);
  submit_all(w, generate_group(w));
  const auto [first, waited] = parked.get();
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_LT(waited, 10s);
  const json a = json::parse(first.body)["job"];
  ASSERT_TRUE(a.is_object()) << first.body;
  const json b = json::parse(
      call("/v1/validation/lease", {{"validator", "b"}, {"arithmetic", 2}}).body)["job"];
  ASSERT_TRUE(b.is_object());
  EXPECT_TRUE(json::parse(call("/v1/validation/lease", {{"arithmetic", 2}}).body)["job"].is_null());
  // A validator that names no engine arithmetic (a build before the field: arithmetic 1), or
  // another one, is refused with the reason: its replays could only disagree.
  for (const json& other : {json::object(), json{{"arithmetic", 3}}}) {
    const auto refused = call("/v1/validation/lease", other);
    EXPECT_EQ(refused.status, 409) << refused.body;
    EXPECT_NE(refused.body.find("engine arithmetic"), std::string::npos) << refused.body;
  }
  // b answered in time: recorded once.
  const auto ok = call("/v1/validation/verdict", {{"job_id", b["job_id"]}, {"pass", true}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(json::parse(ok.body)["recorded"], b["rollout"]["id"]);

  // Refused: no token, a worker's session token, malformed verdicts, an unknown job.
  EXPECT_EQ(call("/v1/validation/lease", json::object(), "").status, 401);
  EXPECT_EQ(call("/v1/validation/lease", json::object(), w.token).status, 403);
  EXPECT_EQ(call("/v1/validation/verdict", {{"job_id", b["job_id"]}, {"pass", false}}).status, 400)
      << "a failure must say what differed";
  EXPECT_EQ(call("/v1/validation/verdict", {{"job_id", b["job_id"]}, {"pass", "yes"}}).status, 400);
  EXPECT_EQ(
      call("/v1/validation/verdict", {{"job_id", b["job_id"]}, {"pass", true}, {"position", -7}})
          .status,
      400);
  EXPECT_EQ(call("/v1/validation/verdict",
                 {{"job_id", b["job_id"]}, {"pass", true}, {"cpu_seconds", -1.0}})
                .status,
            400);
  EXPECT_EQ(call("/v1/validation/verdict", {{"job_id", "no-such-job"}, {"pass", true}}).status,
            404);
  // A second copy of b's verdict is refused.
  EXPECT_EQ(call("/v1/validation/verdict", {{"job_id", b["job_id"]}, {"pass", true}}).status, 404);

  // a's lease runs out: the job goes back to the queue under a new id; the old id is refused.
  std::this_thread::sleep_for(1600ms);
  const json again = json::parse(
      call("/v1/validation/lease", {{"validator", "c"}, {"arithmetic", 2}}).body)["job"];
  ASSERT_TRUE(again.is_object());
  EXPECT_EQ(again["rollout"]["id"], a["rollout"]["id"]);
  EXPECT_NE(again["job_id"], a["job_id"]);
  const auto late = call("/v1/validation/verdict", {{"job_id", a["job_id"]}, {"pass", true}});
  EXPECT_EQ(late.status, 409) << late.body;
  EXPECT_NE(late.body.find("expired"), std::string::npos) << late.body;
  EXPECT_EQ(call("/v1/validation/verdict", {{"job_id", again["job_id"]}, {"pass", true}}).status,
            200);

  EXPECT_EQ(queue->stats().requeued, 1);
  EXPECT_EQ(counter("rollouts_verified"), 2);
  EXPECT_EQ(counter("verification_failures"), 0);
  EXPECT_FALSE(hub->checks().quarantined(w.id));
}

TEST_F(RemoteValidationTest, QuarantineAndUsedSeedsSurviveAHubRestart) {
  start(60'000);
  const Worker w = join("w");
  const Worker bad = join("bad");
  const auto group = generate_group(w);
  submit_all(w, {group.at(0)});
  const auto bad_group = generate_group(bad);
  submit_all(bad, bad_group);
  hub::AuditVerdict failing;
  failing.what = "logprob";
  failing.position = 3;
  failing.detail = "forged";
  hub->checks().record_verdict(bad_group.at(0).id, failing);
  ASSERT_TRUE(hub->checks().quarantined(bad.id));

  restart_hub();
  EXPECT_TRUE(hub->checks().quarantined(bad.id));
  EXPECT_FALSE(hub->checks().quarantined(w.id));
  EXPECT_EQ(counter("workers_quarantined"), 1);
  testing::expect_session_refused(
      *hub, bad.token, "the quarantined worker's session was accepted after the restart");
  // The seed rollout 0 used stays used on its lease: rollout 1 may not draw with it again ...
  net::RolloutSubmission reuse = group.at(1);
  reuse.seed = group.at(0).seed;
  const auto refused = hub->submit(w.id, reuse);
  EXPECT_EQ(refused.status, net::IntakeStatus::kRejected);
  EXPECT_EQ(refused.reason, "bad_seed") << refused.detail;
  // ... while its own seed is still good (the lease is open: only the reuse was refused).
  submit_all(w, {group.at(1)});
}

TEST_F(RemoteValidationTest, TopkRowsAreReplayedExactly) {
  start(60'000);
  gs.topk = 4;
  const Worker w = join("w");
  auto rollouts = generate_group(w);
  ReplaySettings rs;
  rs.sampling = hc.sampling;
  rs.sample_vocab = 256;
  if (gs.eos >= 0) rs.stop_tokens = {gs.eos};
  rs.capacity = hc.max_tokens;
  VersionStates states(*store);
  ReplayValidator validator(config, *task, codec, rs, states);
  const env::QaItem& problem = prompts.at(rollouts[0].prompt_id == prompts[0].id ? 0 : 1);
  size_t prompt = 0;
  while (!rollouts[0].mask[prompt]) ++prompt;
  for (const auto& m : rollouts) {
    ASSERT_EQ(m.topk, 4);
    const Verdict v = validator.check(m, problem, prompt);
    EXPECT_TRUE(v.pass) << v.position << " (" << v.what << "): " << v.detail;
  }
  const size_t p = prompt + 2, k = 4;
  net::RolloutSubmission lp = rollouts[0];
  lp.topk_logprobs[p * k + 1] = std::nextafter(lp.topk_logprobs[p * k + 1], -INFINITY);
  Verdict v = validator.check(lp, problem, prompt);
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.what, "topk") << v.detail;
  EXPECT_EQ(v.position, static_cast<int64_t>(p));
  net::RolloutSubmission id = rollouts[1];
  std::swap(id.topk_ids[p * k + 1], id.topk_ids[p * k + 2]);
  if (id.topk_ids[p * k + 1] == id.topk_ids[p * k + 2]) id.topk_ids[p * k + 2] ^= 1;
  v = validator.check(id, problem, prompt);
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.what, "topk") << v.detail;
  EXPECT_EQ(v.position, static_cast<int64_t>(p));
}

}  // namespace
}  // namespace stoa::verify
