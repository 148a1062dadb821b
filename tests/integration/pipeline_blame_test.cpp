// Blame on the stage that lied, in a real run (docs/design/pipeline.md): `stoa run` with every
// rollout replayed, a `stoa work --max-memory` worker too small for the model, and a hostile
// member this test plays, placed by the hub as the group's last stage. It serves the head like
// a stage — control, weights and commit frames, its commitment signed with the key it gave the
// hub, digests of exactly what it received and answered, so the chain holds and the head and
// intake accept the rollouts — but it draws tokens the weights never gave. The hub's replay fails
// the head's rollouts, blames stage 1 and quarantines the forger, not the head; the forged groups
// are dropped; the head, grouped again with an honest worker, keeps working and replays clean.
#include <atomic>
#include <map>
#include <thread>

#include "core/stage_commitment.h"
#include "engine/stage_digests.h"
#include "engine/stage_frame.h"
#include "integration/cluster.h"
#include "model/config.h"
#include "net/frame_socket.h"
#include "net/hub_client.h"
#include "net/pipeline_protocol.h"
#include "net/protocol.h"

namespace stoa::integration {
namespace {

// The forger: asks for a place every second until stopped; once placed as the last of 2 stages
// it answers every draw with a token of its own choosing, and commits to it honestly.
class ForgingMember {
 public:
  ForgingMember(const std::string& url, const ModelConfig& config, uint64_t memory_bytes)
      : hub_(url, quick_hub_client()),
        config_(config),
        listener_("127.0.0.1", 0),
        key_(SigningKey::generate()) {
    net::JoinRequest j;
    j.name = "forger";
    hub_.join(Cluster::kToken, j);
    worker_id_ = hub_.worker_id();
    asker_ = std::thread([this, memory_bytes] { ask(memory_bytes); });
    server_ = std::thread([this] { serve(); });
  }
  ~ForgingMember() {
    stop_ = true;
    listener_.close();
    asker_.join();
    server_.join();
  }
  const std::string& worker_id() const { return worker_id_; }
  int stage() const { return stage_; }
  int64_t draws_forged() const { return draws_forged_; }
  int64_t commits_signed() const { return commits_signed_; }
  int64_t asks_refused() const { return asks_refused_; }

 private:
  void ask(uint64_t memory_bytes) {
    while (!stop_) {
      try {
        const net::PipelinePlace p = hub_.pipeline_place(memory_bytes, listener_.port(), false, {},
                                                         bytes_hex(key_.public_key()));
        if (p.placed) {
          group_ = p.group_id;
          stage_ = p.stage;
        }
        net::Heartbeat h;
        h.worker_id = worker_id_;
        (void)hub_.heartbeat(h);
      } catch (const std::exception&) {
        ++asks_refused_;  // quarantined: the hub refuses the session
      }
      for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(100ms);
    }
  }
  std::vector<uint8_t> answer(std::span<const uint8_t> frame) {
    const engine::StageFrameKind kind = engine::stage_frame_kind(frame);
    switch (kind) {
      case engine::StageFrameKind::kWeights:
        version_ = engine::decode_stage_weights(frame);
        return engine::encode_stage_weights(version_);
      case engine::StageFrameKind::kPass: {
        const engine::StagePass p = engine::decode_stage_pass(frame);
        const size_t H = static_cast<size_t>(p.hidden);
        size_t row = 0;
        for (const engine::StagePassInput& in : p.inputs) {
          engine::SequenceDigests& d = digests_[in.seq];
          for (size_t t = 0; t < in.tokens.size(); ++t, ++row)
            engine::hash_row(d.in, version_, std::span<const float>(p.rows).subspan(row * H, H));
          d.rows += static_cast<int64_t>(in.tokens.size());
        }
        engine::StageSampled out;
        out.pass = p.pass;
        for (const engine::SampleRequest& r : p.requests) {
          engine::SampledToken t;
          const int64_t vocab = r.vocab > 0 ? r.vocab : config_.vocab_size;
          t.token = static_cast<int32_t>((1000 + draws_forged_ * 7) % std::max<int64_t>(vocab, 1));
          t.logprob = -1.0f;
          for (int64_t k = 0; k < r.params.top_logprobs; ++k)
            t.top.push_back({static_cast<int32_t>((t.token + k) % vocab), -1.0f - k});
          engine::SequenceDigests& d = digests_[p.inputs[static_cast<size_t>(r.input)].seq];
          engine::hash_draw(d.out, version_, t);
          ++d.draws;
          ++draws_forged_;
          out.tokens.push_back(std::move(t));
        }
        return engine::encode_stage_sampled(out);
      }
      case engine::StageFrameKind::kCommit: {
        engine::StageCommit c = engine::decode_stage_commit(frame);
        StageCommitment own = digests_[c.seq].commitment(1, config_.num_layers, false);
        sign_commitment(key_, group_, own);
        c.chain.push_back(own);
        ++commits_signed_;
        return engine::encode_stage_commit(c);
      }
      default: {
        const engine::StageControl c = engine::decode_stage_control(frame);
        if (c.kind == engine::StageFrameKind::kOpen) digests_[c.seq] = {};
        if (c.kind == engine::StageFrameKind::kFork) digests_[c.seq] = digests_[c.source];
        if (c.kind == engine::StageFrameKind::kClose) digests_.erase(c.seq);
        return engine::encode_stage_done();
      }
    }
  }
  void serve() {
    while (!stop_) {
      try {
        net::FrameSocket head = listener_.accept(std::chrono::seconds(600));
        // A real stage serves once it knows its place (the head may dial before it asks again).
        while (stage_ < 0 && !stop_) std::this_thread::sleep_for(50ms);
        digests_.clear();
        while (!stop_) {
          const std::vector<uint8_t> frame = head.receive(std::chrono::seconds(600), 1u << 30);
          head.send(answer(frame), std::chrono::seconds(10));
        }
      } catch (const std::exception&) {  // the head hung up (a break) or we stop
      }
    }
  }

  net::HubClient hub_;
  const ModelConfig config_;
  net::FrameListener listener_;
  std::string worker_id_;
  const SigningKey key_;
  std::atomic<uint64_t> group_{0};
  uint64_t version_ = 0;
  std::map<uint64_t, engine::SequenceDigests> digests_;
  std::atomic<bool> stop_{false};
  std::atomic<int> stage_{-1};
  std::atomic<int64_t> draws_forged_{0};
  std::atomic<int64_t> commits_signed_{0};
  std::atomic<int64_t> asks_refused_{0};
  std::thread asker_, server_;
};

TEST(PipelineBlame, AForgingLastStageIsQuarantinedAndTheHonestHeadKeepsWorking) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  const RunSpec spec = every_rollout_replayed_by_hub();
  Cluster c("pipeline_blame", spec);
  c.start_hub();
  const ModelConfig config = load_model_config((assets().model / "config.json").string());
  const TwoStageMemory memory = two_stage_memory(config);
  ForgingMember forger(c.url(), config, memory.last_stage_memory);
  const std::vector<std::string> small = {"--max-memory", memory.member_cap_mb};
  c.start_worker("small-a", "", small);

  nlohmann::json s;
  const auto counter = [&](const char* name) { return s["counters"].value(name, 0.0); };
  ASSERT_TRUE(wait_until(
      [&] {
        s = c.status();
        return s.contains("counters") && counter("workers_quarantined") >= 1;
      },
      240s))
      << s.dump() << "\n"
      << c.logs();
  EXPECT_EQ(forger.stage(), 1);
  EXPECT_GT(forger.commits_signed(), 0);
  EXPECT_GE(counter("verification_failures"), 1.0);
  EXPECT_GE(s["counters"].value("groups_dropped_quarantined", 0.0), 1.0) << s.dump();
  EXPECT_NE(c.hub().err().find("worker " + forger.worker_id() + " quarantined"), std::string::npos)
      << c.hub().err();
  EXPECT_NE(c.hub().err().find("its pipeline stage 1 lied"), std::string::npos) << c.hub().err();

  // An honest worker comes: once the forger's silence dissolves the group, it and the head are
  // grouped, their rollouts replay clean, and the head was never quarantined.
  c.start_worker("small-b", "", small);
  ASSERT_TRUE(wait_until(
      [&] {
        s = c.status();
        return worker_accepted(s, "small-b") + worker_accepted(s, "small-a") >= 2 &&
               counter("rollouts_verified") - counter("verification_failures") >= 2;
      },
      240s))
      << s.dump() << "\n"
      << c.logs();
  // Every failure blamed the forger: the head and the honest worker are not quarantined (the
  // forged rollouts accepted before the quarantine failed their replays after it).
  EXPECT_EQ(counter("workers_quarantined"), 1.0) << s.dump() << c.logs();
  const double failures = counter("verification_failures");
  EXPECT_GE(forger.asks_refused(), 1);
  std::printf(
      "forger: %lld draws forged, %lld commitments signed, quarantined; the group after: "
      "%.0f rollouts accepted, %.0f verification failures in all\n",
      static_cast<long long>(forger.draws_forged()),
      static_cast<long long>(forger.commits_signed()),
      worker_accepted(s, "small-a") + worker_accepted(s, "small-b"), failures);
  c.stop_all();
}

}  // namespace
}  // namespace stoa::integration
