// One stage of a pipeline (docs/design/pipeline.md): the engine of a span of layers
// (EngineWeights of a LayerSpan, so the stage holds only its tensors), its copies of the
// pipeline's sequences by id (only its layers' caches grow), and the link to the stages after
// it. It answers each frame (stage_frame.h) from the stage before: control frames are applied
// here and passed on; a pass runs the span's layers over the frame's hidden states and either
// hands its own down the link or, on the last stage, draws the tokens the frame asks for.
//
// A bad frame, a sequence the stage does not know, one out of step (its length is not the
// pass's position) or a link that fails is answered with an error frame naming the stage; the
// stage itself stays usable. A pass is checked whole before any sequence changes.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/model_runner.h"
#include "engine/sequence.h"
#include "engine/stage_digests.h"
#include "engine/stage_frame.h"

namespace stoa::engine {

// How a stage reaches the stages after it: one frame out, the answer back (the last stage's
// answer, relayed by the stages between). In a process, a call; across machines, a connection.
// Frames are answered in the order they were sent, so a link may carry many at once: send()
// returns a ticket at once and await() its answer — how a head keeps several micro-batches in
// flight to hide the links' latency. Both are thread-safe.
class StageLink {
 public:
  virtual ~StageLink() = default;
  virtual uint64_t send(std::span<const uint8_t> frame) = 0;
  virtual std::vector<uint8_t> await(uint64_t ticket) = 0;
  std::vector<uint8_t> exchange(std::span<const uint8_t> frame) { return await(send(frame)); }
};

class PipelineStage;

// The link to a stage in the same process (tests, and the measure of a pipeline's compute
// without links): the frame still goes through its encoding.
class LocalStageLink final : public StageLink {
 public:
  explicit LocalStageLink(PipelineStage& next) : next_(next) {}
  // The stage answers at once (under a lock: a stage computes one frame at a time).
  uint64_t send(std::span<const uint8_t> frame) override;
  std::vector<uint8_t> await(uint64_t ticket) override;

 private:
  PipelineStage& next_;
  std::mutex mu_;
  uint64_t next_ticket_ = 0;
  std::map<uint64_t, std::vector<uint8_t>> answers_;
};

// Where a stage's weights come from when they change during a run (a worker's verified sync:
// roles/worker/stage_worker.h). A stage without one holds fixed weights (tests, the bench) and
// takes any version it is told.
class StageWeights {
 public:
  virtual ~StageWeights() = default;
  // At a safe point (no pass running): brings the engine to `version`, every verified update
  // up to it, waiting a bounded time for the sync to verify it. Returns the version held after:
  // above `version` when the engine is already past it (an anchor). Throws when it cannot.
  virtual uint64_t bring_to(uint64_t version) = 0;
  // Held across a pass (an anchor written in place waits for it).
  virtual std::shared_lock<std::shared_mutex> pass_lock() = 0;
  // The version in the engine now.
  virtual uint64_t version() const = 0;
};

// What a stage does with a frame: answer it (the last stage, a control frame there, or an
// error) or hand `bytes` down to the next stage, whose answer is then the answer.
struct StageOutcome {
  bool forward = false;
  std::vector<uint8_t> bytes;
};

class PipelineStage {
 public:
  // `next` is null on the last stage (whose span must end the model) and on a stage whose
  // server forwards for it (process()); a stage that is not the first takes hidden states, so
  // its span must not start at layer 0. At most `max_sequences` sequences live at once (a head
  // that never closes cannot grow a stage without bound).
  PipelineStage(std::unique_ptr<EngineWeights> weights, std::unique_ptr<StageLink> next,
                ThreadPool* pool = nullptr, int64_t max_sequences = 4096);

  // Answers one frame, through the link for what goes down; never throws for what the frame
  // says (an error frame instead).
  std::vector<uint8_t> handle(std::span<const uint8_t> frame);
  // The stage's own part of handle(): what to answer or to hand down (a server with its own
  // connection to the next stage forwards, and relays answers in order).
  StageOutcome process(std::span<const uint8_t> frame);
  // Drops every sequence and the weights version (a new head session: the old head's
  // sequences are gone, and the new head says its version before its first pass).
  void reset() {
    sequences_.clear();
    digests_.clear();
    version_.reset();
  }
  // In a group the hub formed: this stage is `stage` of group `group_id` and signs its
  // commitments (kCommit frames) with `key`, whose public half the hub gave the head. Without a
  // key a commit frame is refused (a group formed by hand commits to nothing).
  void set_commit_key(uint64_t group_id, int32_t stage, const SigningKey& key) {
    group_id_ = group_id;
    stage_index_ = stage;
    commit_key_ = key;
  }
  // Weights that change between passes (null: fixed). A stage with them computes a pass only
  // with the version the head last named (kWeights): one whose engine moved on refuses.
  void set_weights_source(StageWeights* weights) { weights_ = weights; }

  LayerSpan span() const { return runner_.weights().span(); }
  ModelRunner& runner() { return runner_; }
  int64_t live_sequences() const { return static_cast<int64_t>(sequences_.size()); }
  // Total bytes of the frames handed down the link and of the answers that came back.
  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }

 private:
  void control(const StageControl& c);
  StageOutcome use_weights(uint64_t version);
  StageOutcome pass(const StagePass& p);
  // Rows received and sent on, and draws, into the sequences' digests (after a pass succeeded).
  void digest_pass(const StagePass& p, std::span<const float> sent,
                   std::span<const SampledToken> drawn);
  StageOutcome commit(StageCommit c);
  std::vector<uint8_t> forward_down(std::span<const uint8_t> frame);
  Sequence& sequence(uint64_t id);

  ModelRunner runner_;
  std::unique_ptr<StageLink> next_;
  int64_t max_sequences_;
  StageWeights* weights_ = nullptr;
  std::optional<uint64_t> version_;  // what the head named last
  std::map<uint64_t, Sequence> sequences_;
  std::map<uint64_t, SequenceDigests> digests_;  // by sequence, as sequences_
  uint64_t group_id_ = 0;
  int32_t stage_index_ = -1;
  std::optional<SigningKey> commit_key_;
  std::vector<SequenceInput> inputs_;  // per pass, grow-only
  int64_t bytes_sent_ = 0;
  int64_t bytes_received_ = 0;
};

}  // namespace stoa::engine
