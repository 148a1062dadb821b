#include "engine/model_runner.h"

#include <algorithm>

#include "engine/pass_workers.h"
#include "engine/scratch.h"

#include "core/error.h"

namespace stoa::engine {

ModelRunner::ModelRunner(EngineWeights weights, ThreadPool* pool)
    : ModelRunner(std::make_unique<EngineWeights>(std::move(weights)), pool) {}

ModelRunner::ModelRunner(std::unique_ptr<EngineWeights> weights, ThreadPool* pool)
    : weights_(std::move(weights)),
      arch_(make_architecture(*weights_)),
      pool_(pool ? pool : &ThreadPool::global()) {}

ModelRunner ModelRunner::from_model(const ModelWeights& weights, WeightFormat format,
                                    ThreadPool* pool) {
  return ModelRunner(EngineWeights::from_model(weights, format), pool);
}

std::unique_ptr<SequenceState> ModelRunner::new_state(int64_t capacity) const {
  return std::make_unique<Sequence>(config(), capacity);
}

PassLogits ModelRunner::forward(std::span<const BackendInput> inputs) {
  backend_inputs_.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto* seq = dynamic_cast<Sequence*>(inputs[i].seq);
    STOA_CHECK(inputs[i].seq == nullptr || seq != nullptr, ErrorKind::kInvalidArgument,
               "batch input ", i, ": the sequence belongs to another engine backend");
    backend_inputs_.push_back({seq, inputs[i].tokens, inputs[i].logits});
  }
  return append_batch_view(backend_inputs_);
}

Tensor ModelRunner::append(Sequence& seq, std::span<const int32_t> tokens, Logits which) {
  SequenceInput input{&seq, tokens, which};
  return std::move(append_batch(std::span<const SequenceInput>(&input, 1)).front());
}

std::vector<Tensor> ModelRunner::append_batch(std::span<const SequenceInput> inputs) {
  const PassLogits logits = append_batch_view(inputs);
  const int64_t V = config().vocab_size;
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t(DType::kF32, {logits.count(i), V});
    const std::span<const float> rows = logits.rows(i);
    std::copy(rows.begin(), rows.end(), t.as<float>());
    out.push_back(std::move(t));
  }
  return out;
}

PassLogits ModelRunner::append_batch_view(std::span<const SequenceInput> inputs) {
  STOA_CHECK(weights_->span().whole(config()), ErrorKind::kInvalidArgument,
             "this engine holds only ", span_string(config(), weights_->span()),
             ": a pipeline stage's passes take the previous stage's hidden states");
  return append_batch_stage(inputs, nullptr);
}

PassLogits ModelRunner::append_batch_stage(std::span<const SequenceInput> inputs,
                                           const float* hidden_in) {
  const ModelConfig& c = config();
  const LayerSpan span = weights_->span();
  STOA_CHECK((hidden_in == nullptr) == span.embeds(), ErrorKind::kInvalidArgument, "the stage of ",
             span_string(c, span),
             span.embeds() ? " embeds its tokens and takes no hidden states"
                           : " needs the previous stage's hidden states");
  const int64_t H = c.hidden_size;
  const int64_t V = c.vocab_size;

  // Validate everything first: a failed pass must leave every sequence as it was.
  check_pass_inputs(inputs, V);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Sequence& seq = *inputs[i].seq;
    STOA_CHECK(seq.num_layers() == c.num_layers && seq.kv_dim() == c.num_kv_heads * c.head_dim &&
                   seq.hidden() == H,
               ErrorKind::kInvalidArgument, "batch input ", i,
               ": the sequence was made for a different model");
  }

  // Per-pass buffers are grow-only scratch (scratch.h): a steady decode step allocates only
  // the returned logits tensors.
  thread_local Batch batch;
  batch.tokens.clear();
  batch.positions.clear();
  batch.segments.clear();
  for (const SequenceInput& in : inputs) {
    if (in.tokens.empty()) continue;
    BatchSegment seg{in.seq, batch.size(), static_cast<int64_t>(in.tokens.size())};
    for (int64_t j = 0; j < seg.count; ++j) {
      batch.tokens.push_back(in.tokens[static_cast<size_t>(j)]);
      batch.positions.push_back(in.seq->length() + j);
    }
    batch.segments.push_back(seg);
  }
  const int64_t T = batch.size();

  // Logits only for the rows asked for: the vocabulary projection dominates a small model.
  thread_local std::vector<int64_t> rows;
  std::vector<std::pair<int64_t, int64_t>>& range = logit_ranges_;  // into `rows`
  rows.clear();
  range.assign(inputs.size(), {0, 0});
  {
    int64_t offset = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const int64_t n = static_cast<int64_t>(inputs[i].tokens.size());
      const int64_t first = static_cast<int64_t>(rows.size());
      if (n > 0 && inputs[i].logits == Logits::kAll) {
        for (int64_t j = 0; j < n; ++j) rows.push_back(offset + j);
      } else if (n > 0 && inputs[i].logits == Logits::kLast) {
        rows.push_back(offset + n - 1);
      }
      range[i] = {first, static_cast<int64_t>(rows.size())};
      offset += n;
    }
  }
  // Only the stage that ends the model makes logits.
  if (!span.heads(c)) {
    rows.clear();
    for (auto& r : range) r = {0, 0};
  }
  const int64_t R = static_cast<int64_t>(rows.size());

  thread_local std::vector<float> normed_buf;
  float* hidden = scratch(hidden_, static_cast<size_t>(T * H));
  pass_hidden_floats_ = static_cast<size_t>(T * H);
  float* normed = scratch(normed_buf, static_cast<size_t>(R * H));
  float* logits = scratch(logits_, static_cast<size_t>(R * V));
  // The whole pass holds the pool's threads once (pass_workers.h): its ~100s of parallel
  // operations are handed out by spinning, not by condition-variable wakeups.
  run_pass(*pool_, [&] {
    if (hidden_in == nullptr) {
      const Linear& embedding = weights_->embedding();
      for (int64_t t = 0; t < T; ++t)
        embedding.row(batch.tokens[static_cast<size_t>(t)], hidden + t * H);
    } else {
      std::copy(hidden_in, hidden_in + T * H, hidden);
    }
    if (T > 0) arch_->forward_layers(batch, hidden, *pool_, observer_ ? &observer_ : nullptr);
    for (int64_t r = 0; r < R; ++r) {
      arch_->final_norm(hidden + rows[static_cast<size_t>(r)] * H, normed + r * H);
    }
    if (R > 0) weights_->lm_head().forward(normed, R, logits, *pool_);
  });

  for (const SequenceInput& in : inputs) {
    in.seq->commit(in.tokens.data(), static_cast<int64_t>(in.tokens.size()));
  }
  return PassLogits(logits, V, &logit_ranges_);
}

Tensor ModelRunner::score(std::span<const int32_t> tokens, int64_t prefill) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  STOA_CHECK(prefill >= 0 && prefill <= n, ErrorKind::kInvalidArgument, "prefill length ", prefill,
             " outside [0, ", n, "]");
  const int64_t V = config().vocab_size;
  Sequence seq = new_sequence(std::max<int64_t>(n, 1));
  Tensor out(DType::kF32, {n, V});
  if (prefill > 0) {
    Tensor first = append(seq, tokens.subspan(0, static_cast<size_t>(prefill)), Logits::kAll);
    std::copy(first.as<float>(), first.as<float>() + first.numel(), out.as<float>());
  }
  for (int64_t i = prefill; i < n; ++i) {
    Tensor step = append(seq, tokens.subspan(static_cast<size_t>(i), 1), Logits::kLast);
    std::copy(step.as<float>(), step.as<float>() + V, out.as<float>() + i * V);
  }
  return out;
}

}  // namespace stoa::engine
