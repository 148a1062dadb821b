// Continuous batching over a fixed set of decode slots. Every step() is ONE forward pass
// (EngineBackend::forward: today's CPU engine is ModelRunner) carrying, for every active slot,
// either its next sampled token (decode) or a run of pending tokens (a new prompt, or a tool
// observation appended between turns): joining, leaving and multi-turn prefills happen in the same
// pass as the others' decode tokens, so each weight matrix is read once per step for all of them.
//
//   BatchDecoder dec(runner, /*slots=*/32, /*capacity=*/4096);
//   dec.start_group(prompt, 8, options);     // 8 rollouts: the prompt is computed once, then
//   forked while (dec.active() > 0) for (const StepEvent& e : dec.step()) { ... e.slot, e.token ...
//   } dec.resume(slot, observation, options);  // next turn: prefilled in the next step
//   dec.release(slot);
//
// Batch invariance: a slot's tokens and log-probs depend only on its own tokens and
// (seed, stream) — never on which other slots share its steps, when they join or leave, or on the
// thread count (the runner computes every token's row alone; each slot owns its sampler). So a
// slot reproduces generate() on the same request bit for bit (tested).
//
// Shared prompts (add_prefix): a prompt whose samples may start at different times (a worker's
// group of G rollouts on fewer than G free slots) is computed once, up to its last token, in the
// next step beside the other slots' work, and kept; every sample forks it and feeds only the last
// prompt token in its first step, so its first token is drawn from logits of the weights of that
// step (weights may change between steps).
//
// Memory: each slot's KV cache is preallocated for `capacity` tokens when the slot is filled
// (SequenceState::preallocate; set_preallocate(false) lets it grow with use instead, for long
// capacities), conv state is fixed-size; a step allocates only the logits tensors it returns to
// the sampler.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/backend.h"
#include "engine/generate.h"
#include "engine/sampler.h"

namespace stoa::engine {

struct StepEvent {
  int64_t slot = 0;
  SampledToken sampled;
  bool finished = false;  // the slot stopped (stop token, budget or capacity) and is now paused
  bool stopped = false;   // it ended on a stop token
};

class BatchDecoder {
 public:
  BatchDecoder(EngineBackend& backend, int64_t slots, int64_t capacity);

  int64_t slots() const { return static_cast<int64_t>(slots_.size()); }
  int64_t capacity() const { return capacity_; }
  int64_t active() const;  // slots that take part in the next step
  int64_t free_slots() const;

  // Sampling sees only the first n logits of every row (0: all): ids past a tokenizer's
  // vocabulary in a padded embedding table are never drawn.
  void set_sample_vocab(int64_t n);
  // Whether a filled slot reserves its whole capacity at once (default true).
  void set_preallocate(bool preallocate) { preallocate_ = preallocate; }

  // Fills a free slot with a fresh sequence; `prompt` (non-empty) is prefilled in the next step.
  // Returns the slot. Throws kInvalidArgument when no slot is free.
  int64_t start(std::span<const int32_t> prompt, const GenerateOptions& options);
  // Prefix sharing: n slots whose common prompt is computed once (in one slot, next step); the
  // other n-1 are forks of it taken after that pass, each sampling with its own stream
  // options.stream + i. Returns the n slots.
  std::vector<int64_t> start_group(std::span<const int32_t> prompt, int64_t n,
                                   const GenerateOptions& options);
  // A shared prompt (non-empty), prefilled up to its last token in the next step; returns its id.
  int64_t add_prefix(std::span<const int32_t> prompt);
  // Fills a free slot with a fork of the prefix (taken once the prefix is computed) that samples
  // with (options.seed, options.stream) after feeding the prompt's last token. Returns the slot.
  int64_t start_from_prefix(int64_t prefix, const GenerateOptions& options);
  // No more samples will start from the prefix; its memory goes once no slot waits for it.
  void drop_prefix(int64_t prefix);

  // Ends an active slot's turn now (a stop criterion the decoder does not know, e.g. a stop
  // string): it is paused as if it had stopped, its last sampled token still to be fed.
  void pause(int64_t slot);
  // Multi-turn: a paused (finished) slot continues with `tokens` (e.g. a tool observation),
  // prefilled in the next step beside the other slots' decode tokens, then generates again
  // under `options` (a new budget; the slot's sampler stream carries on).
  void resume(int64_t slot, std::span<const int32_t> tokens, const GenerateOptions& options);
  // Frees a slot and returns its sequence (prompt + everything fed so far; a finished slot's
  // last sampled token is not yet in it — resume() feeds it first).
  std::unique_ptr<SequenceState> release(int64_t slot);
  // Frees a slot in any state (a cancelled rollout), dropping whatever it holds.
  void discard(int64_t slot);

  // One forward pass over every active slot; one event per slot that sampled a token.
  std::vector<StepEvent> step();

  const SequenceState& sequence(int64_t slot) const;
  // What the machines that computed the slot's sequence commit to (a pipeline group's chain of
  // signed commitments; empty on one machine). Talks to the stages: a rollout's end only.
  PipelineProof pipeline_proof(int64_t slot);
  bool is_free(int64_t slot) const;
  bool is_paused(int64_t slot) const;

 private:
  enum class State { kFree, kActive, kPaused, kWaitingForFork, kWaitingForPrefix };
  struct Slot {
    State state = State::kFree;
    std::unique_ptr<SequenceState> seq;
    std::optional<Sampler> sampler;
    std::vector<int32_t> pending;  // fed in the next step
    std::vector<int32_t> stop_tokens;
    int64_t budget = 0;   // tokens still to sample in this turn
    int64_t leader = -1;  // kWaitingForFork: the slot whose prompt pass this one forks
    int64_t prefix = -1;  // kWaitingForPrefix: the prefix it forks once that is computed
  };
  struct Prefix {
    bool live = false;
    bool dropped = false;
    bool computed = false;
    std::unique_ptr<SequenceState> seq;  // the prompt but its last token
    std::vector<int32_t> pending;        // that part, until computed
    int32_t last = 0;                    // fed by every fork in its first step
  };
  Slot& slot_at(int64_t slot);
  const Slot& slot_at(int64_t slot) const;
  int64_t take_free_slot();
  void arm(Slot& s, const GenerateOptions& options, uint64_t stream);
  void check_prompt(std::span<const int32_t> prompt) const;
  Prefix& prefix_at(int64_t prefix);
  // Makes slot s a live fork of a computed prefix.
  void fork_prefix(Slot& s, const Prefix& p);
  void free_prefix_if_unused(int64_t prefix);
  // Samples for slot i from `logits` and updates its state.
  // The draw of slot i's next token, which goes in at `position`.
  SampleRequest request_for(int64_t i, size_t input, uint64_t position);
  // Slot i's event for the token it drew.
  StepEvent take_sample(int64_t i, SampledToken sampled);

  EngineBackend& backend_;
  int64_t capacity_;
  int64_t sample_vocab_ = 0;
  bool preallocate_ = true;
  std::vector<Slot> slots_;
  std::vector<Prefix> prefixes_;  // ids index it; freed entries are reused
};

}  // namespace stoa::engine
