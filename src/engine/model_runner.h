// The engine's front door: owns the weights and the bound architecture, and advances sequences.
//
//   ModelRunner runner(EngineWeights::from_model(weights, WeightFormat::kInt8));
//   Sequence seq = runner.new_sequence(4096);
//   Tensor last = runner.append(seq, prompt);              // prefill: logits [1, vocab]
//   Tensor next = runner.append(seq, {sampled});           // decode one token
//   Sequence branch = seq.fork();                          // share the prompt prefix
//   runner.append(branch, observation, Logits::kLast);     // tool output: a multi-token append
//
// append_batch advances many sequences in one pass (weights are read once per pass). Every
// token's logits are computed by the same arithmetic whether it came in a prefill, a decode
// step or a batch, so a prefill followed by decode equals a full recompute.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "engine/decoder.h"
#include "engine/engine_weights.h"
#include "engine/sequence.h"
#include "model/weights.h"

namespace stoa::engine {

enum class Logits {
  kNone,  // only advance the state
  kLast,  // [1, vocab] for the last appended token
  kAll,   // [n, vocab], one row per appended token
};

struct SequenceInput {
  Sequence* seq = nullptr;
  std::span<const int32_t> tokens;
  Logits logits = Logits::kLast;
};

// The logits of one pass, read in place from the runner's buffer: no allocation or copy per
// sequence (at batch 32 a per-sequence tensor cost a zero-fill, a copy and fresh pages of
// 32 x vocab floats every step). Valid until the runner's next pass; moving the runner ends it.
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

class ModelRunner {
 public:
  // `pool` defaults to ThreadPool::global(); it must outlive the runner.
  explicit ModelRunner(EngineWeights weights, ThreadPool* pool = nullptr);
  // Weights already on the heap keep their address (a worker's weight sync reads them while the
  // runner computes with them: roles/worker/weight_sync_engine.h).
  explicit ModelRunner(std::unique_ptr<EngineWeights> weights, ThreadPool* pool = nullptr);
  static ModelRunner from_model(const ModelWeights& weights, WeightFormat format,
                                ThreadPool* pool = nullptr);
  ModelRunner(ModelRunner&&) noexcept = default;
  ModelRunner& operator=(ModelRunner&&) noexcept = default;

  const ModelConfig& config() const { return weights_->config(); }
  const EngineWeights& weights() const { return *weights_; }
  // For in-place weight updates between passes (never during one).
  EngineWeights& mutable_weights() { return *weights_; }
  // The int8 matmul backend (default kW8A8); kReference is the plain-loop reference engine.
  void set_backend(Backend backend) { weights_->set_backend(backend); }

  Sequence new_sequence(int64_t capacity) const { return Sequence(config(), capacity); }

  // Appends tokens to one sequence and returns the requested logits (f32).
  Tensor append(Sequence& seq, std::span<const int32_t> tokens, Logits which = Logits::kLast);
  // Advances several distinct sequences in one pass; result i belongs to inputs[i]. Everything
  // is validated before any state changes: a bad token id, a sequence over capacity, a
  // sequence from another model or listed twice gets an Error and no sequence is touched.
  std::vector<Tensor> append_batch(std::span<const SequenceInput> inputs);
  // The same pass, its logits read in place (the decode loops' form; see PassLogits).
  PassLogits append_batch_view(std::span<const SequenceInput> inputs);

  // The oracle's entry point: runs `tokens` on a fresh sequence, the first `prefill` in one
  // pass and the rest one token at a time (so the cache is exercised), and returns the logits
  // of every position [tokens.size(), vocab].
  Tensor score(std::span<const int32_t> tokens, int64_t prefill);

 private:
  std::unique_ptr<EngineWeights> weights_;  // heap: the architecture points into it
  std::unique_ptr<Architecture> arch_;
  ThreadPool* pool_;
  std::vector<float> logits_;                              // grow-only: [rows, vocab]
  std::vector<std::pair<int64_t, int64_t>> logit_ranges_;  // per input of the last pass
};

}  // namespace stoa::engine
