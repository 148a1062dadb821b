// Continuous batching over a fixed set of decode slots. Every step() is ONE forward pass
// (ModelRunner::append_batch) carrying, for every active slot, either its next sampled token
// (decode) or a run of pending tokens (a new prompt, or a tool observation appended between
// turns): joining, leaving and multi-turn prefills happen in the same pass as the others'
// decode tokens, so each weight matrix is read once per step for all of them.
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
// Memory: each slot's KV cache is preallocated for `capacity` tokens when the slot is filled
// (Sequence::preallocate), conv state is fixed-size; a step allocates only the logits tensors it
// returns to the sampler.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/generate.h"
#include "engine/model_runner.h"
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
  BatchDecoder(ModelRunner& runner, int64_t slots, int64_t capacity);

  int64_t slots() const { return static_cast<int64_t>(slots_.size()); }
  int64_t capacity() const { return capacity_; }
  int64_t active() const;  // slots that take part in the next step
  int64_t free_slots() const;

  // Fills a free slot with a fresh sequence; `prompt` (non-empty) is prefilled in the next step.
  // Returns the slot. Throws kInvalidArgument when no slot is free.
  int64_t start(std::span<const int32_t> prompt, const GenerateOptions& options);
  // Prefix sharing: n slots whose common prompt is computed once (in one slot, next step); the
  // other n-1 are forks of it taken after that pass, each sampling with its own stream
  // options.stream + i. Returns the n slots.
  std::vector<int64_t> start_group(std::span<const int32_t> prompt, int64_t n,
                                   const GenerateOptions& options);
  // Multi-turn: a paused (finished) slot continues with `tokens` (e.g. a tool observation),
  // prefilled in the next step beside the other slots' decode tokens, then generates again
  // under `options` (a new budget; the slot's sampler stream carries on).
  void resume(int64_t slot, std::span<const int32_t> tokens, const GenerateOptions& options);
  // Frees a slot and returns its sequence (prompt + everything fed so far; a finished slot's
  // last sampled token is not yet in it — resume() feeds it first).
  Sequence release(int64_t slot);

  // One forward pass over every active slot; one event per slot that sampled a token.
  std::vector<StepEvent> step();

  const Sequence& sequence(int64_t slot) const;
  bool is_free(int64_t slot) const;
  bool is_paused(int64_t slot) const;

 private:
  enum class State { kFree, kActive, kPaused, kWaitingForFork };
  struct Slot {
    State state = State::kFree;
    std::optional<Sequence> seq;
    std::optional<Sampler> sampler;
    std::vector<int32_t> pending;  // fed in the next step
    std::vector<int32_t> stop_tokens;
    int64_t budget = 0;   // tokens still to sample in this turn
    int64_t leader = -1;  // kWaitingForFork: the slot whose prompt pass this one forks
  };
  Slot& slot_at(int64_t slot);
  const Slot& slot_at(int64_t slot) const;
  int64_t take_free_slot();
  void arm(Slot& s, const GenerateOptions& options, uint64_t stream);
  // Samples for slot i from `logits` and updates its state.
  StepEvent sample_into(int64_t i, const float* logits);

  ModelRunner& runner_;
  int64_t capacity_;
  std::vector<Slot> slots_;
};

}  // namespace stoa::engine
