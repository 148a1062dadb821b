// The seam between what drives generation (BatchDecoder, and through it the worker's episode
// runner) and what computes a forward pass. Today's CPU engine (ModelRunner over EngineWeights,
// sequences in host memory) is the one implementation; a GPU backend (Metal, CUDA, ggml) is
// one more class behind this header, in a folder of its own, with nothing above it changed.
// docs/design/engine-backend.md holds the design on paper.
//
// Four things make a backend:
//   - weights: the model the passes compute with. The host copy (EngineWeights) stays the
//     authority — PULSE scatters patches into it and hashes it — so a backend that computes
//     elsewhere mirrors it;
//   - write-tensor: after writing tensors of the host copy (between passes, never during one)
//     the caller names them in weights_written(), so a device backend uploads just those (a
//     PULSE patch touches a few tensors' values; the CPU backend computes from the host copy
//     and has nothing to do);
//   - sequence state: per token sequence, the KV caches and conv state, wherever the backend
//     keeps them, behind SequenceState (tokens and lengths are the same for every backend);
//   - a batched forward pass: many sequences, each appending one or more tokens, in one pass,
//     the logits of the requested rows read in place — or, through forward_sampled, the tokens
//     drawn from them (a pipeline samples at its last stage: docs/design/pipeline.md).
// Exactness is part of the contract: a token's logits depend only on its sequence's tokens and
// the weights — never on the batch around it — so replay verification holds across backends
// only where their arithmetic agrees bit for bit (a new backend proves it against this one).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/stage_commitment.h"
#include "engine/engine_weights.h"
#include "engine/sampler.h"
#include "model/config.h"

namespace stoa::engine {

enum class Logits {
  kNone,  // only advance the state
  kLast,  // [1, vocab] for the last appended token
  kAll,   // [n, vocab], one row per appended token
};

// The decode state of one token sequence on some backend. Token i sits at position i, so the
// length is the next position.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  virtual int64_t length() const = 0;
  virtual int64_t capacity() const = 0;
  int64_t remaining() const { return capacity() - length(); }
  virtual const std::vector<int32_t>& tokens() const = 0;
  // Reserves memory for the whole capacity now, so appends never allocate.
  virtual void preallocate() = 0;
  // A deep copy (several rollouts sharing one prompt prefix).
  virtual std::unique_ptr<SequenceState> fork_state() const = 0;
  // At a rollout's end: what the machines that computed it commit to (a pipeline group's signed
  // chain, core/stage_commitment.h); none for a sequence computed by one machine.
  virtual PipelineProof pipeline_proof() { return {}; }
};

struct BackendInput {
  SequenceState* seq = nullptr;
  std::span<const int32_t> tokens;
  Logits logits = Logits::kLast;
};

// The logits of one pass, read in place from the backend's buffer: no allocation or copy per
// sequence (at batch 32 a per-sequence tensor cost a zero-fill, a copy and fresh pages of
// 32 x vocab floats every step). Valid until the backend's next pass.
class PassLogits {
 public:
  PassLogits(const float* data, int64_t vocab, const std::vector<std::pair<int64_t, int64_t>>* rows)
      : data_(data), vocab_(vocab), rows_(rows) {}

  size_t size() const { return rows_->size(); }
  int64_t vocab() const { return vocab_; }
  // Rows requested for inputs[i] (0 for Logits::kNone, 1 for kLast, n for kAll).
  int64_t count(size_t i) const { return (*rows_)[i].second - (*rows_)[i].first; }
  // inputs[i]'s rows, [count(i) x vocab] row-major.
  std::span<const float> rows(size_t i) const {
    const auto [first, last] = (*rows_)[i];
    return {data_ + first * vocab_, static_cast<size_t>((last - first) * vocab_)};
  }
  // inputs[i]'s last requested row (the next-token distribution of a decode step).
  std::span<const float> last(size_t i) const;

 private:
  const float* data_;
  int64_t vocab_;
  const std::vector<std::pair<int64_t, int64_t>>* rows_;  // per input: [first, last) row
};

// One token to draw from the last logits row of inputs[input]: the first `vocab` logits (0: all)
// under `params` with the uniform `uniform` (Sampler::draw). Several requests may name one
// input (the samples of a group forked from one prompt pass).
struct SampleRequest {
  size_t input = 0;
  SamplingParams params;
  double uniform = 0;
  int64_t vocab = 0;
};

// Throws kInvalidArgument unless every request names an input that makes logits and carries
// valid sampling settings; run before a pass, so a bad request changes no sequence.
template <typename Input>
void check_sample_requests(std::span<const Input> inputs, std::span<const SampleRequest> requests) {
  for (const SampleRequest& r : requests) {
    STOA_CHECK(r.input < inputs.size() && inputs[r.input].logits != Logits::kNone &&
                   !inputs[r.input].tokens.empty(),
               ErrorKind::kInvalidArgument, "sample request for batch input ", r.input,
               ", which makes no logits");
    validate_sampling_params(r.params);
  }
}

// Throws kInvalidArgument unless every input names a sequence, none twice, with room for its
// tokens, every token id inside [0, vocab): what every backend checks before a pass changes
// anything (the sequence's model is the backend's own check).
template <typename Input>
void check_pass_inputs(std::span<const Input> inputs, int64_t vocab) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Input& in = inputs[i];
    STOA_CHECK(in.seq != nullptr, ErrorKind::kInvalidArgument, "batch input ", i,
               " has no sequence");
    // A linear scan, not a set: batches are small and this runs every decode step.
    for (size_t j = 0; j < i; ++j) {
      STOA_CHECK(inputs[j].seq != in.seq, ErrorKind::kInvalidArgument, "batch input ", i,
                 " repeats a sequence already in the batch");
    }
    const auto n = static_cast<int64_t>(in.tokens.size());
    STOA_CHECK(n <= in.seq->remaining(), ErrorKind::kInvalidArgument, "batch input ", i,
               ": sequence of ", in.seq->length(), " tokens with capacity ", in.seq->capacity(),
               " cannot take ", n, " more");
    for (size_t j = 0; j < in.tokens.size(); ++j) {
      const int32_t id = in.tokens[j];
      STOA_CHECK(id >= 0 && id < vocab, ErrorKind::kInvalidArgument, "batch input ", i, ": token ",
                 j, " has id ", id, ", outside the vocabulary [0, ", vocab, ")");
    }
  }
}

// The tokens `requests` draw from a pass's logits, result i for requests[i].
std::vector<SampledToken> sample_requests(const PassLogits& logits,
                                          std::span<const SampleRequest> requests);

class EngineBackend {
 public:
  virtual ~EngineBackend() = default;

  virtual const char* backend_name() const = 0;  // "cpu", ...
  virtual const ModelConfig& config() const = 0;

  // Weights: the authoritative host copy, for reading, hashing and in-place writes between
  // passes; every write is followed by weights_written() naming the tensors it touched.
  virtual EngineWeights& host_weights() = 0;
  virtual void weights_written(std::span<const std::string> names) = 0;

  // A fresh, empty sequence that may hold `capacity` tokens.
  virtual std::unique_ptr<SequenceState> new_state(int64_t capacity) const = 0;

  // Advances distinct sequences of this backend in one pass; row ranges follow `inputs`.
  // Everything is validated before any state changes (a bad token id, a sequence over its
  // capacity, of another backend or model, or listed twice is an Error and touches nothing).
  virtual PassLogits forward(std::span<const BackendInput> inputs) = 0;
  // The same pass, answered with the tokens `requests` draw (result i for requests[i]), each
  // sample_with_uniform of its row: bit for bit what sampling forward()'s logits gives. The
  // default does exactly that; a backend whose logits live far away samples where they are.
  virtual std::vector<SampledToken> forward_sampled(std::span<const BackendInput> inputs,
                                                    std::span<const SampleRequest> requests);
};

}  // namespace stoa::engine
