// One rollout as the worker builds it, token by token: the lease's prompt (mask 0), then every
// sampled token with the behaviour log-prob it was drawn with and the policy version that
// produced it (mask 1), and the tool observations (mask 0). The version is per token, not per
// rollout, because weights may change between two decode steps of the same rollout (in-flight
// update); the trainer's staleness rule and DPPO's trust region both read it.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/arithmetic.h"
#include "net/protocol.h"

namespace stoa::worker {

class RolloutRecord {
 public:
  // Starts with the lease's prompt tokens; the id (a fresh UUID v4) is the idempotency key the
  // hub deduplicates retries by, fixed here so every retry of this rollout reuses it.
  RolloutRecord(const net::Lease& lease, std::string worker_id, int32_t topk = 0);

  void add_generated(int32_t token, float logprob, uint64_t version,
                     std::span<const int32_t> topk_ids = {},
                     std::span<const float> topk_logprobs = {});
  void add_observation(std::span<const int32_t> tokens);
  void set_answer(std::string answer) { answer_ = std::move(answer); }
  void set_turns(int32_t turns) { turns_ = turns; }
  void set_timings(const net::RolloutTimings& timings) { timings_ = timings; }
  // A pipeline group's rollout: the group and its stages' signed commitments.
  void set_pipeline_proof(PipelineProof proof) {
    sub_.pipeline_group = proof.group_id;
    sub_.stage_commitments = std::move(proof.chain);
  }
  // What a validator needs to replay the rollout (net::RolloutSubmission's seed, kernel_target
  // and prompt_version).
  void set_replay_info(std::optional<uint64_t> seed, std::string kernel_target,
                       uint64_t prompt_version) {
    sub_.seed = seed;
    sub_.kernel_target = std::move(kernel_target);
    sub_.prompt_version = prompt_version;
    sub_.arithmetic = engine::kArithmetic;
  }

  // Cuts the transcript to its first n tokens (a rollout that ran out of transcript budget is
  // submitted truncated; the hub scores what is there). Keeps at least the prompt.
  void truncate(size_t n);

  const std::string& id() const { return sub_.id; }
  const std::vector<int32_t>& tokens() const { return sub_.tokens; }
  const std::vector<uint8_t>& mask() const { return sub_.mask; }
  size_t generated() const { return generated_; }
  // The oldest policy version among generated tokens (what the hub's staleness rule reads);
  // kInvalidArgument when nothing was generated.
  uint64_t oldest_version() const;

  // The submission, checked with net::validate_structure (throws kInvalidArgument naming the
  // field). `expected_tokens`, if given, must equal the record's tokens — the Episode's own
  // transcript, so a bookkeeping slip is caught here and not by the hub.
  net::RolloutSubmission finish(const std::vector<int32_t>* expected_tokens = nullptr) const;

 private:
  net::RolloutSubmission sub_;
  std::string answer_;
  int32_t turns_ = 0;
  net::RolloutTimings timings_;
  size_t generated_ = 0;
};

}  // namespace stoa::worker
