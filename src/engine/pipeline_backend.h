// The head of a pipeline as an EngineBackend (docs/design/pipeline.md): the stage that embeds —
// it holds layers [0, k) and the embeddings, and drives the rollouts — and a link to the
// stages after it, the last of which holds the output head and draws the tokens. BatchDecoder,
// the episode runner and the worker drive it as they drive the CPU engine, through
// forward_sampled: the head runs its layers, sends the hidden states down with the draws' uniforms,
// and gets the tokens back. The bits are a whole machine's (tested): every token's arithmetic is
// the same, only cut between machines, and the sampler is the same function of the same uniform.
//
// Thread-safe, so several decoders (each on its own thread, each with its own slots) keep
// several micro-batches in flight: a caller holds the head only for its pass and the send, and
// waits for its tokens while the others compute — the head works on one micro-batch while the
// stages after it work on the others, which is what hides the links' latency.
//
// Its sequences are ids on every stage; opening, forking, reserving and dropping one is a
// control frame down the chain. A failure past the head (a stage erring, a link dying) leaves
// the stages out of step with the head, so the backend is broken from then on: every later
// call fails at once with the first failure's reason, and the caller rebuilds the pipeline
// (the hub re-issues the group's leases).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/model_runner.h"
#include "engine/pipeline_stage.h"

namespace stoa::engine {

class PipelineSequence;

class PipelineBackend final : public EngineBackend {
 public:
  // `head` holds a span that embeds and does not end the model; `next` reaches the rest.
  PipelineBackend(std::unique_ptr<EngineWeights> head, std::unique_ptr<StageLink> next,
                  ThreadPool* pool = nullptr);
  ~PipelineBackend() override;

  const char* backend_name() const override { return "pipeline"; }
  const ModelConfig& config() const override { return runner_.config(); }
  // The head stage's share of the weights (each stage patches its own share).
  EngineWeights& host_weights() override { return runner_.host_weights(); }
  void weights_written(std::span<const std::string> /*names*/) override {}
  std::unique_ptr<SequenceState> new_state(int64_t capacity) const override;
  // Logits stay on the last stage: kUnsupported (drive a pipeline through forward_sampled).
  PassLogits forward(std::span<const BackendInput> inputs) override;
  std::vector<SampledToken> forward_sampled(std::span<const BackendInput> inputs,
                                            std::span<const SampleRequest> requests) override;

  // At a safe point (no pass in flight): the stages after the head compute with the weights of
  // `version` from now on. Returns the version they hold: above `version` when one of them is
  // already past it, and then the head catches up and says the new one.
  uint64_t use_weights(uint64_t version);
  // A new link in place of a broken one (the stages drop the old session's sequences): the
  // backend is usable again once every sequence of the old one is gone.
  void reconnect(std::unique_ptr<StageLink> next);

  // In a group the hub formed (docs/design/pipeline.md, "Blame on the stage that lied"): the
  // group's id, this head's key and every stage's public key (the head's first, as the hub
  // handed them out); from then on every sequence's pipeline_proof() asks the stages for their
  // signed commitments and checks each signature. Without: sequences commit to nothing.
  void set_commit_key(uint64_t group_id, const SigningKey& key, std::vector<PublicKey> stage_keys);

  bool broken() const;
  // Bytes of the frames sent down and of the answers, since construction.
  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }
  // The most passes that were down the chain at once (sent, answer not yet back): above 1 only
  // when several decoders drive the head, each with its own micro-batch.
  int64_t peak_passes_in_flight() const { return peak_in_flight_; }

 private:
  friend class PipelineSequence;
  // Sends a control frame down; throws (and breaks the pipeline) unless every stage did it.
  // `seq` is the new sequence's id for kOpen and kFork (0: a fresh one is taken).
  uint64_t control(StageControl c) const;
  // The chain of `seq` (the head's own commitment first), checked whole: a stage that refuses,
  // a chain that does not hold or a last stage that counts other draws than the head asked
  // for breaks the pipeline.
  PipelineProof commit(const PipelineSequence& seq) const;
  // With mu_ held: the frame goes down (in the order of the head's passes).
  uint64_t send_locked(std::span<const uint8_t> frame) const;
  // Without it: the answer of a ticket, an error frame or a dead link breaking the pipeline.
  std::vector<uint8_t> await_answer(uint64_t ticket) const;
  [[noreturn]] void break_with(const std::string& reason) const;
  void check_usable() const;

  ModelRunner runner_;
  std::unique_ptr<StageLink> next_;
  // Mutable: opening a sequence is a const operation of EngineBackend but talks to the stages.
  mutable std::mutex mu_;  // the head's runner, the counters below, the order of sends
  mutable uint64_t next_id_ = 1;
  uint64_t passes_ = 0;
  std::vector<SequenceInput> head_inputs_;  // per pass, grow-only
  uint64_t group_id_ = 0;
  std::optional<SigningKey> commit_key_;
  std::vector<PublicKey> stage_keys_;
  std::atomic<uint64_t> stages_version_{0};  // what the stages compute with (use_weights)
  mutable std::mutex broken_mu_;
  mutable std::string broken_;
  mutable std::atomic<int64_t> bytes_sent_{0};
  mutable std::atomic<int64_t> bytes_received_{0};
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> peak_in_flight_{0};
};

}  // namespace stoa::engine
