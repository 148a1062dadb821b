// The fixture of the in-process replay-verification tests (replay_test.cpp, peer_test.cpp): a
// real Hub (ledger, intake, leases) with real PULSE blobs of a tiny LFM2 at two versions, the
// hub's validator thread (HubValidator, whose verdicts a test may hold back), and generation
// through the worker's own EpisodeRunner (test_worker.h).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_test_util.h"
#include "env/env_test_util.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/search_task.h"
#include "env/token_codec.h"
#include "pulse/model_view.h"
#include "pulse/publisher.h"
#include "roles/hub/hub.h"
#include "roles/verify/hub_validator.h"
#include "roles/verify/replay_hub_setup.h"
#include "roles/verify/replay_validator.h"
#include "roles/verify/test_worker.h"

namespace stoa::verify::testing {

struct Worker {
  std::string id;
  std::string token;
};

class ReplayFixture : public ::testing::Test {
 protected:
  // Settings of a test's own, applied to the replay test hub's before the Hub is built.
  virtual void configure(hub::HubConfig&, hub::HubDeps&) {}
  void SetUp() override {
    dir = std::make_unique<env::testing::TempDir>("verify_replay");
    env::build_bm25_index(env::testing::small_corpus(), *dir / "index");
    index = std::make_unique<env::Bm25Index>(*dir / "index");
    task = std::make_unique<env::SearchTask>(*index, 2);
    store = std::make_unique<pulse::BlobStore>(*dir / "blobs");

    // Two versions of a tiny LFM2 on one int8 grid, published as the trainer publishes them.
    const ModelWeights w1 = engine::testing::tiny_model("tiny-lfm2", 7);
    const ModelWeights w2 = engine::testing::tiny_model("tiny-lfm2", 8);
    config = w1.config;
    pulse::Int8Quantizer quantizer;
    v1 = pulse::int8_view_of(w1, 1, &quantizer);
    v2 = pulse::int8_view_of(w2, 2, &quantizer);

    hub::HubConfig hc;
    hc.ledger_path = *dir / "ledger.sqlite";
    testing::set_replay_test_hub(hc);
    hub::HubDeps deps;
    configure(hc, deps);
    deps.task = task.get();
    deps.codec = &codec;
    deps.vocab_size = config.vocab_size;
    deps.prompts = testing::replay_test_prompts(3);
    prompts = deps.prompts;
    deps.store = store.get();
    hub = std::make_unique<hub::Hub>(hc, deps);
    hub_config = hc;

    pulse::Publisher publisher(*store, {});
    for (const pulse::Int8State* s : {&v1, &v2})
      hub->publish_version(publisher.publish(*s), s->state_hash());

    ReplaySettings settings;
    settings.sampling = hc.sampling;
    settings.sample_vocab = 256;
    eos = static_cast<int32_t>(config.eos_token_id);
    if (eos >= 0) settings.stop_tokens = {eos};
    settings.capacity = hc.max_tokens;
    states = std::make_unique<VersionStates>(*store);
    validator = std::make_unique<ReplayValidator>(config, *task, codec, settings, *states);
    replay_settings = settings;
    hub_validator = std::make_unique<HubValidator>(
        *validator, [this](const std::string& id, const hub::AuditVerdict& v) {
          {
            std::unique_lock lock(verdict_mutex);
            verdicts[id] = v;
            verdicts_released.wait(lock, [this] { return !hold_verdicts; });
          }
          hub->checks().record_verdict(id, v);
        });
    hub->checks().set_auditor(hub_validator.get());

    gs.config = &config;
    gs.task = task.get();
    gs.codec = &codec;
    gs.max_tokens = hc.max_tokens;
    gs.sample_vocab = 256;
    gs.eos = eos;
  }
  void TearDown() override {
    set_hold_verdicts(false);  // a failed ASSERT may leave the validation thread waiting
    hub_validator.reset();
    hub.reset();
  }

  Worker join(const std::string& name, const std::string& peer = "") {
    net::JoinRequest r;
    r.name = name;
    const net::JoinResponse j = hub->join("join-secret", r, peer);
    return {j.worker_id, j.session_token};
  }
  net::Lease lease(const Worker& w) {
    auto l = hub->lease(w.id).lease;
    EXPECT_TRUE(l.has_value());
    EXPECT_EQ(l->seeds.size(), static_cast<size_t>(l->samples));
    return *l;
  }
  const env::QaItem& problem(const net::Lease& l) const {
    for (const auto& q : prompts)
      if (q.id == l.prompt_id) return q;
    throw std::runtime_error("no prompt " + l.prompt_id);
  }
  std::vector<net::RolloutSubmission> generate(const Worker& w, const net::Lease& l,
                                               const pulse::Int8State& first,
                                               const pulse::Int8State* second, int64_t switch_after,
                                               std::optional<uint64_t> label = std::nullopt) {
    return testing::generate_lease(gs, l, problem(l), w.id, first, second, switch_after, label);
  }
  net::RolloutResponse submit(const Worker& w, const net::RolloutSubmission& m) {
    return hub->submit(w.id, m);
  }
  hub::AuditVerdict verdict(const std::string& rollout_id) {
    std::lock_guard lock(verdict_mutex);
    auto it = verdicts.find(rollout_id);
    EXPECT_NE(it, verdicts.end()) << "no verdict on " << rollout_id;
    return it == verdicts.end() ? hub::AuditVerdict{} : it->second;
  }

  std::unique_ptr<env::testing::TempDir> dir;
  std::unique_ptr<env::Bm25Index> index;
  std::unique_ptr<env::SearchTask> task;
  env::ByteCodec codec;
  std::unique_ptr<pulse::BlobStore> store;
  ModelConfig config;
  pulse::Int8State v1, v2;
  std::vector<env::QaItem> prompts;
  std::unique_ptr<hub::Hub> hub;
  hub::HubConfig hub_config;
  ReplaySettings replay_settings;  // what the hub's validator replays with
  std::unique_ptr<VersionStates> states;
  std::unique_ptr<ReplayValidator> validator;
  std::unique_ptr<HubValidator> hub_validator;
  testing::GenerateSettings gs;
  int32_t eos = -1;
  std::mutex verdict_mutex;
  std::map<std::string, hub::AuditVerdict> verdicts;
  // While set, verdicts wait before they reach the hub: the validation thread runs concurrently
  // with intake, and a quarantine that lands between two submissions of one group would turn the
  // second into a group_closed rejection, making the counts below depend on the scheduler.
  std::condition_variable verdicts_released;
  bool hold_verdicts = false;
  void set_hold_verdicts(bool hold) {
    {
      std::lock_guard lock(verdict_mutex);
      hold_verdicts = hold;
    }
    verdicts_released.notify_all();
  }
};

inline size_t first_generated(const net::RolloutSubmission& m) {
  size_t p = 0;
  while (p < m.mask.size() && !m.mask[p]) ++p;
  return p;
}

// Where an attack starts: the first generated token followed by two more of the same turn. (The
// first generated token alone is not enough: with some lease seeds the first turn is a single
// token, and an attack at first_generated + 1 or + 2 would then land on an observation.)
inline size_t attack_point(const net::RolloutSubmission& m) {
  size_t p = first_generated(m);
  while (p + 2 < m.mask.size() && !(m.mask[p] && m.mask[p + 1] && m.mask[p + 2])) ++p;
  return p;
}

inline void truncate(net::RolloutSubmission& m, size_t n) {
  m.tokens.resize(n);
  m.mask.resize(n);
  m.logprobs.resize(n);
  m.versions.resize(n);
}

}  // namespace stoa::verify::testing
