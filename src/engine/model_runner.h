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
#include "engine/architecture.h"
#include "engine/backend.h"
#include "engine/engine_weights.h"
#include "engine/sequence.h"
#include "model/weights.h"

namespace stoa::engine {

// The CPU engine's own form of a batch input (its Sequence, not the backend's SequenceState).
struct SequenceInput {
  Sequence* seq = nullptr;
  std::span<const int32_t> tokens;
  Logits logits = Logits::kLast;
};

// The CPU backend (backend.h): sequences in host memory, passes on the thread pool.
class ModelRunner final : public EngineBackend {
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

  // EngineBackend
  const char* backend_name() const override { return "cpu"; }
  const ModelConfig& config() const override { return weights_->config(); }
  // In-place weight updates between passes (never during one) write here.
  EngineWeights& host_weights() override { return *weights_; }
  // The passes read the host copy itself: nothing to mirror.
  void weights_written(std::span<const std::string> /*names*/) override {}
  std::unique_ptr<SequenceState> new_state(int64_t capacity) const override;
  // kInvalidArgument for a sequence that is not this engine's Sequence.
  PassLogits forward(std::span<const BackendInput> inputs) override;

  const EngineWeights& weights() const { return *weights_; }
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

  // A pipeline stage's pass (docs/design/pipeline.md) over the layers of weights().span():
  // `hidden_in` holds the previous stage's hidden states of the inputs' tokens, [T, hidden]
  // back to back in input order (null on the stage that embeds: it embeds the tokens). The
  // stage that ends the model returns the requested logits as append_batch_view does; any
  // other returns no rows and leaves the hidden states for the next stage in pass_hidden().
  // Every token arithmetic is the whole model's, so K stages give a whole runner's bits.
  PassLogits append_batch_stage(std::span<const SequenceInput> inputs, const float* hidden_in);
  // Every later pass calls `observer` after each of its layers (architecture.h); an empty one
  // stops it. The replay's blame pass reads the rows at a pipeline's stage boundaries with it.
  void set_layer_observer(LayerObserver observer) { observer_ = std::move(observer); }

  // [T, hidden] after the layers of the last pass (valid until the next pass).
  std::span<const float> pass_hidden() const { return {hidden_.data(), pass_hidden_floats_}; }

  // The oracle's entry point: runs `tokens` on a fresh sequence, the first `prefill` in one
  // pass and the rest one token at a time (so the cache is exercised), and returns the logits
  // of every position [tokens.size(), vocab].
  Tensor score(std::span<const int32_t> tokens, int64_t prefill);

 private:
  std::unique_ptr<EngineWeights> weights_;  // heap: the architecture points into it
  std::unique_ptr<Architecture> arch_;
  ThreadPool* pool_;
  std::vector<float> logits_;  // grow-only: [rows, vocab]
  std::vector<float> hidden_;  // grow-only: [tokens, hidden]
  size_t pass_hidden_floats_ = 0;
  std::vector<std::pair<int64_t, int64_t>> logit_ranges_;  // per input of the last pass
  std::vector<SequenceInput> backend_inputs_;              // forward()'s, grow-only
  LayerObserver observer_;                                 // empty: none (the usual case)
};

}  // namespace stoa::engine
