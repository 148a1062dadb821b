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
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "engine/model_runner.h"
#include "engine/sequence.h"
#include "engine/stage_frame.h"

namespace stoa::engine {

// How a stage reaches the stages after it: one frame out, the answer back (the last stage's
// answer, relayed by the stages between). In a process, a call; across machines, a connection.
class StageLink {
 public:
  virtual ~StageLink() = default;
  virtual std::vector<uint8_t> exchange(std::span<const uint8_t> frame) = 0;
};

class PipelineStage;

// The link to a stage in the same process (tests, and the measure of a pipeline's compute
// without links): the frame still goes through its encoding.
class LocalStageLink final : public StageLink {
 public:
  explicit LocalStageLink(PipelineStage& next) : next_(next) {}
  std::vector<uint8_t> exchange(std::span<const uint8_t> frame) override;

 private:
  PipelineStage& next_;
};

class PipelineStage {
 public:
  // `next` is null on the last stage (whose span must end the model); a stage that is not the
  // first takes hidden states, so its span must not start at layer 0. At most `max_sequences`
  // sequences live at once (a head that never closes cannot grow a stage without bound).
  PipelineStage(std::unique_ptr<EngineWeights> weights, std::unique_ptr<StageLink> next,
                ThreadPool* pool = nullptr, int64_t max_sequences = 4096);

  // Answers one frame; never throws for what the frame says (an error frame instead).
  std::vector<uint8_t> handle(std::span<const uint8_t> frame);

  LayerSpan span() const { return runner_.weights().span(); }
  ModelRunner& runner() { return runner_; }
  int64_t live_sequences() const { return static_cast<int64_t>(sequences_.size()); }
  // Total bytes of the frames handed down the link and of the answers that came back.
  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }

 private:
  std::vector<uint8_t> control(const StageControl& c);
  std::vector<uint8_t> pass(const StagePass& p);
  std::vector<uint8_t> forward_down(std::span<const uint8_t> frame);
  Sequence& sequence(uint64_t id);

  ModelRunner runner_;
  std::unique_ptr<StageLink> next_;
  int64_t max_sequences_;
  std::map<uint64_t, Sequence> sequences_;
  std::vector<SequenceInput> inputs_;  // per pass, grow-only
  int64_t bytes_sent_ = 0;
  int64_t bytes_received_ = 0;
};

}  // namespace stoa::engine
