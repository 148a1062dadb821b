// A pipeline group with a member that serves nothing, in a real run (docs/design/pipeline.md, "A
// group that keeps breaking"): `stoa run` and a `stoa work --max-memory` worker too small for the
// model, grouped by the hub with a hostile member this test plays — it joins, keeps its place,
// heartbeats, answers the head's control and weights frames like a stage and refuses every pass.
// The head breaks at each pass, gives its leases back and tells the hub which stage refused;
// at the third break the hub dissolves the group and keeps the refuser out of groups, while the
// head is grouped again with an honest worker and their rollouts replay clean.
#include <atomic>
#include <thread>

#include "core/signing.h"
#include "engine/stage_frame.h"
#include "integration/cluster.h"
#include "model/config.h"
#include "model/layer_span.h"
#include "net/frame_socket.h"
#include "net/hub_client.h"
#include "net/protocol.h"

namespace stoa::integration {
namespace {

bool log_has(Cluster& c, const std::string& worker, const std::string& words) {
  return c.worker(worker).err().find(words) != std::string::npos;
}

// The hostile member: asks for a place every second (and heartbeats) until stopped; once placed
// as stage 1 of 2 it serves the head — control frames done, weights frames the version named,
// every pass an error naming its span, as a real stage's refusal reads.
class RefusingMember {
 public:
  RefusingMember(const std::string& url, const ModelConfig& config, uint64_t memory_bytes)
      : hub_(url, quick_hub_client()), config_(config), listener_("127.0.0.1", 0) {
    net::JoinRequest j;
    j.name = "refuser";
    hub_.join(Cluster::kToken, j);
    asker_ = std::thread([this, memory_bytes] { ask(memory_bytes); });
    server_ = std::thread([this] { serve(); });
  }
  ~RefusingMember() {
    stop_ = true;
    listener_.close();
    asker_.join();
    server_.join();
  }
  int stage() const { return stage_; }
  int64_t asks_refused_after_placed() const { return unplaced_after_placed_; }
  int64_t passes_refused() const { return passes_refused_; }
  int64_t placed_again() const { return placed_again_; }

 private:
  void ask(uint64_t memory_bytes) {
    while (!stop_) {
      try {
        const net::PipelinePlace p = hub_.pipeline_place(memory_bytes, listener_.port(), false, {},
                                                         bytes_hex(key_.public_key()));
        if (p.placed) {
          if (unplaced_after_placed_ > 0) ++placed_again_;
          stage_ = p.stage;
        } else if (stage_ >= 0) {
          ++unplaced_after_placed_;
        }
        net::Heartbeat h;
        h.worker_id = hub_.worker_id();
        (void)hub_.heartbeat(h);
      } catch (const std::exception&) {
      }
      for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(100ms);
    }
  }
  void serve() {
    const std::string refusal =
        "stage " + span_string(config_, split_layers(config_, 2)[1]) + ": refusing every pass";
    while (!stop_) {
      try {
        net::FrameSocket head = listener_.accept(std::chrono::seconds(600));
        while (!stop_) {
          const std::vector<uint8_t> frame = head.receive(std::chrono::seconds(600), 1u << 30);
          const engine::StageFrameKind kind = engine::stage_frame_kind(frame);
          std::vector<uint8_t> answer;
          if (kind == engine::StageFrameKind::kPass) {
            ++passes_refused_;
            answer = engine::encode_stage_error(refusal);
          } else if (kind == engine::StageFrameKind::kWeights) {
            answer = engine::encode_stage_weights(engine::decode_stage_weights(frame));
          } else {
            answer = engine::encode_stage_done();
          }
          head.send(answer, std::chrono::seconds(10));
        }
      } catch (const std::exception&) {  // the head hung up (a break) or we stop
      }
    }
  }

  net::HubClient hub_;
  const ModelConfig config_;
  net::FrameListener listener_;
  const SigningKey key_ = SigningKey::generate();  // it must say one to be placed
  std::atomic<bool> stop_{false};
  std::atomic<int> stage_{-1};
  std::atomic<int64_t> unplaced_after_placed_{0};
  std::atomic<int64_t> passes_refused_{0};
  std::atomic<int64_t> placed_again_{0};
  std::thread asker_, server_;
};

TEST(PipelineRefusal, AMemberThatRefusesEveryPassIsDissolvedAndKeptOut) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  const RunSpec spec = every_rollout_replayed_by_hub();
  Cluster c("pipeline_refusal", spec);
  c.start_hub();
  const ModelConfig config = load_model_config((assets().model / "config.json").string());
  const TwoStageMemory memory = two_stage_memory(config);
  RefusingMember refuser(c.url(), config, memory.last_stage_memory);
  const std::vector<std::string> small = {"--max-memory", memory.member_cap_mb};
  c.start_worker("small-a", "", small);

  nlohmann::json s;
  ASSERT_TRUE(wait_until(
      [&] {
        s = c.status();
        return s.contains("pipeline_groups") && s["pipeline_groups"].value("broken", 0) >= 1;
      },
      240s))
      << s.dump() << "\n"
      << c.logs();
  EXPECT_EQ(refuser.stage(), 1);
  EXPECT_GE(refuser.passes_refused(), 3);
  EXPECT_EQ(s["pipeline_groups"].value("benched", 0), 1) << s.dump();
  EXPECT_TRUE(log_has(c, "small-a", "refusing every pass")) << c.worker("small-a").err();
  {
    // The hub's group ids start at a random value: the one small-a was placed in first.
    const std::string log = c.worker("small-a").err();
    const std::string mark = "placed in pipeline group ";
    const size_t at = log.find(mark);
    ASSERT_NE(at, std::string::npos) << log;
    const size_t from = at + mark.size();
    const std::string first = log.substr(from, log.find(':', from) - from);
    EXPECT_TRUE(log_has(c, "small-a", "the hub dissolved pipeline group " + first + " ")) << log;
  }

  // An honest worker comes: it and the head are grouped, the refuser is not, and their rollouts
  // replay clean; nobody is quarantined (a refusal is not a forgery).
  c.start_worker("small-b", "", small);
  const auto group_accepted = [&] {
    return worker_accepted(s, "small-a") + worker_accepted(s, "small-b");
  };
  ASSERT_TRUE(wait_until(
      [&] {
        s = c.status();
        return group_accepted() >= 2;
      },
      240s))
      << s.dump() << "\n"
      << c.logs();
  EXPECT_GE(refuser.asks_refused_after_placed(), 1);
  EXPECT_EQ(refuser.placed_again(), 0);
  EXPECT_EQ(s["pipeline_groups"].value("formed", 0), 2) << s.dump();
  EXPECT_EQ(s["pipeline_groups"].value("benched", 0), 1) << s.dump();
  EXPECT_EQ(s["counters"].value("verification_failures", 0.0), 0.0) << s.dump() << c.logs();
  EXPECT_EQ(s["counters"].value("workers_quarantined", 0.0), 0.0) << s.dump();
  std::printf("after the refuser was benched: %.0f group rollouts accepted, %.0f leases released\n",
              group_accepted(), s["counters"].value("leases_released", 0.0));
  c.stop_all();
}

}  // namespace
}  // namespace stoa::integration
