// A real Hub over real parts, small: a two-document BM25 index behind the real SearchTask, the
// byte-level codec (vocabulary 256), three questions, a fresh ledger and blob store in a temp
// dir, and a clock the test moves by hand (lease deadlines); serve() puts the HTTP front end on it.
#pragma once
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "env/episode.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/search_task.h"
#include "env/token_codec.h"
#include "net/protocol.h"
#include "net/swarm/swarm.h"
#include "pulse/blob_store.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub.h"
#include "roles/worker/rollout_record.h"

namespace stoa::hub::testing {

class HubFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("stoa_hub_test_" + net::random_token().substr(0, 10));
    std::filesystem::create_directories(dir);
    env::build_bm25_index(
        std::vector<env::CorpusDoc>{{"d1", "Borvex\nBorvex treats migraine."},
                                    {"d2", "Kalumin\nKalumin is made by Zentra."}},
        (dir / "index").string());
    index = std::make_unique<env::Bm25Index>((dir / "index").string());
    task = std::make_unique<env::SearchTask>(*index);
    store = std::make_unique<pulse::BlobStore>((dir / "blobs").string());
    config.ledger_path = (dir / "ledger.sqlite").string();
    config.join_token = "join-secret";
    config.group_size = 2;
    config.lease_ttl_ms = 10'000;
    config.lease_max_ms = 30'000;
    config.max_staleness = 2;
    config.max_tokens = 2048;
    config.sampling.max_turns = 2;
    clock = 1'000'000;
  }
  void TearDown() override {
    server.reset();
    hub.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  HubDeps deps() {
    HubDeps d;
    d.task = task.get();
    d.codec = &codec;
    d.vocab_size = 256;
    d.prompts = {
        {"q1", "What does Borvex treat?", {"migraine"}, "migraine", "", "", "", "train", "", ""},
        {"q2", "Who makes Kalumin?", {"Zentra"}, "Zentra", "", "", "", "train", "", ""},
        {"q3", "What is Borvex?", {"a drug"}, "a drug", "", "", "", "train", "", ""}};
    d.store = store.get();
    d.clock_ms = [this] { return clock.load(); };
    return d;
  }
  Hub& open_hub() {
    hub.reset();
    hub = std::make_unique<Hub>(config, deps());
    return *hub;
  }
  // The HTTP front end on the open hub (open_hub() first); TearDown stops it before the hub.
  void serve(ServerOptions options = {}) {
    server = std::make_unique<HubServer>(*hub, options);
    server->start();
  }
  void publish(uint64_t version) {
    pulse::Published p;
    p.version = version;
    hub->publish_version(p, Hash128{version, version});
  }
  std::string join(const std::string& name = "w") {
    net::JoinRequest r;
    r.name = name;
    return hub->join("join-secret", r).worker_id;
  }
  // A rollout for `lease` whose generated text is `text`, every model token from `version`.
  net::RolloutSubmission rollout(const std::string& worker, const net::Lease& lease,
                                 const std::string& text, uint64_t version) {
    worker::RolloutRecord record(lease, worker);  // the worker's own builder
    for (int32_t id : codec.encode(text)) record.add_generated(id, -0.5f, version);
    record.set_answer(text);
    return record.finish();
  }
  // `worker` leases and submits one whole group of right answers, each rollout naming its
  // sample's seed when the lease gives seeds (verification on); returns the rollout ids, and
  // fails the test unless the lease came and every rollout was accepted.
  std::vector<std::string> submit_group(const std::string& worker) {
    const auto r = hub->lease(worker);
    EXPECT_TRUE(r.lease.has_value()) << worker << " got no lease";
    if (!r.lease) return {};
    std::vector<std::string> ids;
    for (int s = 0; s < r.lease->samples; ++s) {
      worker::RolloutRecord record(*r.lease, worker);
      for (int32_t id : codec.encode("<answer>migraine</answer>"))
        record.add_generated(id, -0.5f, 1);
      record.set_answer("<answer>migraine</answer>");
      if (!r.lease->seeds.empty())
        record.set_replay_info(r.lease->seeds.at(static_cast<size_t>(s)), "", 1);
      net::RolloutSubmission m = record.finish();
      EXPECT_EQ(hub->submit(worker, m).status, net::IntakeStatus::kAccepted);
      ids.push_back(m.id);
    }
    return ids;
  }

  std::filesystem::path dir;
  std::unique_ptr<env::Bm25Index> index;
  std::unique_ptr<env::SearchTask> task;
  env::ByteCodec codec;
  std::unique_ptr<pulse::BlobStore> store;
  HubConfig config;
  std::atomic<int64_t> clock{0};
  std::unique_ptr<Hub> hub;
  std::unique_ptr<HubServer> server;
};

// A hub serving HTTP on loopback with its swarm (skipped in a build without a swarm engine);
// configure() changes the config before the hub opens.
class SwarmHubFixture : public HubFixture {
 protected:
  void SetUp() override {
    if (!net::swarm::available()) GTEST_SKIP() << "this build has no swarm engine";
    HubFixture::SetUp();
    configure();
    open_hub();
    ServerOptions so;
    so.threads = 8;
    serve(so);
    url = "http://127.0.0.1:" + std::to_string(server->port());
  }
  virtual void configure() {}

  std::string url;
};

}  // namespace stoa::hub::testing
