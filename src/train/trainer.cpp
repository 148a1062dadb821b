// The trainer: micro-batching, the RL and SFT steps, AdamW with clipping and the schedule,
// weight export. Checkpoints live in checkpoint.cpp (same Impl, see trainer_impl.h).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "model/tensor_source.h"
#include "train/losses.h"
#include "train/trainer_impl.h"
#include "train/wire.h"

namespace stoa::train {
namespace {

// One sequence of a step, whatever its source (rollout or SFT example).
struct Sequence {
  const std::vector<int32_t>* tokens = nullptr;
  const Rollout* rollout = nullptr;  // null for SFT
  const std::vector<uint8_t>* mask = nullptr;
  double advantage = 0.0;
};

// Device tensors of one micro-batch: the padded tokens and, per trainable token, where its
// prediction sits in the flattened [B·T] hidden states and what the loss needs about it.
struct MicroBatch {
  torch::Tensor tokens;     // [B, T] int64
  torch::Tensor positions;  // [N] int64 index into B·T (the position predicting the token)
  torch::Tensor targets;    // [N] int64
  torch::Tensor mu_logp, advantage, weight;  // [N] f32
  torch::Tensor topk_ids, topk_mu_logp;      // [N, K] or undefined
  int64_t real_tokens = 0;
};

MicroBatch make_micro_batch(const std::vector<Sequence>& seqs, size_t begin, size_t end,
                            double weight, int64_t topk, torch::Device device) {
  int64_t T = 0;
  for (size_t i = begin; i < end; ++i) {
    T = std::max<int64_t>(T, static_cast<int64_t>(seqs[i].tokens->size()));
  }
  const int64_t B = static_cast<int64_t>(end - begin);
  std::vector<int64_t> tokens(static_cast<size_t>(B * T), 0);  // pad id 0: never read
  std::vector<int64_t> positions, targets, topk_ids;
  std::vector<float> mu, adv, topk_mu;
  MicroBatch mb;
  for (int64_t b = 0; b < B; ++b) {
    const Sequence& s = seqs[begin + static_cast<size_t>(b)];
    const std::vector<int32_t>& tok = *s.tokens;
    const std::vector<uint8_t>& mask = s.rollout ? s.rollout->trainable : *s.mask;
    mb.real_tokens += static_cast<int64_t>(tok.size());
    for (size_t t = 0; t < tok.size(); ++t) {
      tokens[static_cast<size_t>(b * T) + t] = tok[t];
      if (t == 0 || !mask[t]) continue;
      positions.push_back(b * T + static_cast<int64_t>(t) - 1);
      targets.push_back(tok[t]);
      if (!s.rollout) continue;
      mu.push_back(std::min(s.rollout->behaviour_logprobs[t], 0.0f));
      adv.push_back(static_cast<float>(s.advantage));
      for (int64_t j = 0; j < topk; ++j) {
        size_t at = t * static_cast<size_t>(topk) + static_cast<size_t>(j);
        topk_ids.push_back(s.rollout->topk_ids[at]);
        topk_mu.push_back(std::min(s.rollout->topk_logprobs[at], 0.0f));
      }
    }
  }
  auto i64 = [&](std::vector<int64_t>& v, std::vector<int64_t> shape) {
    return torch::from_blob(v.data(), shape, torch::kInt64).clone().to(device);
  };
  auto f32 = [&](std::vector<float>& v, std::vector<int64_t> shape) {
    return torch::from_blob(v.data(), shape, torch::kFloat32).clone().to(device);
  };
  const int64_t N = static_cast<int64_t>(positions.size());
  mb.tokens = i64(tokens, {B, T});
  mb.positions = i64(positions, {N});
  mb.targets = i64(targets, {N});
  mb.weight =
      torch::full({N}, weight, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  if (!mu.empty()) {
    mb.mu_logp = f32(mu, {N});
    mb.advantage = f32(adv, {N});
  }
  if (topk > 0) {
    mb.topk_ids = i64(topk_ids, {N, topk});
    mb.topk_mu_logp = f32(topk_mu, {N, topk});
  }
  return mb;
}

// Splits the sequences (longest first, so padding stays small) into micro-batches of at most
// `budget` padded tokens; a sequence longer than the budget runs alone.
std::vector<std::pair<size_t, size_t>> plan_micro_batches(std::vector<Sequence>* seqs,
                                                          int64_t budget) {
  std::stable_sort(seqs->begin(), seqs->end(), [](const Sequence& a, const Sequence& b) {
    return a.tokens->size() > b.tokens->size();
  });
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t begin = 0;
  while (begin < seqs->size()) {
    const int64_t T = static_cast<int64_t>((*seqs)[begin].tokens->size());  // longest first
    size_t end = begin + 1;
    while (end < seqs->size() && static_cast<int64_t>(end - begin + 1) * T <= budget) ++end;
    ranges.emplace_back(begin, end);
    begin = end;
  }
  return ranges;
}

// Data parallel: this rank's share of the step's sequences. Longest first, dealt round-robin, so
// every rank gets about the same number of tokens; the loss weights were computed over the whole
// step before the split, so the ranks' gradients sum to the one-process gradient.
void keep_share(std::vector<Sequence>* seqs, const Communicator* ranks) {
  if (!ranks || ranks->world_size() == 1) return;
  std::stable_sort(seqs->begin(), seqs->end(), [](const Sequence& a, const Sequence& b) {
    return a.tokens->size() > b.tokens->size();
  });
  std::vector<Sequence> mine;
  for (size_t i = static_cast<size_t>(ranks->rank()); i < seqs->size();
       i += static_cast<size_t>(ranks->world_size())) {
    mine.push_back((*seqs)[i]);
  }
  *seqs = std::move(mine);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

torch::Device parse_device(const std::string& name) {
  torch::Device device(torch::kCPU);
  try {
    device = torch::Device(name);
  } catch (const std::exception& e) {
    fail(ErrorKind::kInvalidArgument, "device '", name, "' is not a libtorch device (cpu, cuda, ",
         "cuda:N)");
  }
  STOA_CHECK(!device.is_cuda() || torch::cuda::is_available(), ErrorKind::kUnsupported, "device '",
             name, "' asked for CUDA, but this libtorch build or machine has none");
  return device;
}

// Debian's libtorch does its CPU matrix products in OpenBLAS (the pthread build), whose worker
// threads torch::set_num_threads does not reach: left alone it keeps one per core, and they spin
// between calls, so a "one-thread" trainer occupied both cores of this machine and a two-thread
// one four threads on two cores (docs/design/train.md has the measurements). Found at run time
// so that a libtorch on another BLAS (MKL, a CUDA build) is left alone.
namespace {
void set_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set(threads);
}
}  // namespace

Trainer::Impl::Impl(const ModelConfig& config, const TrainOptions& opts)
    : options(opts), base_config(config), device(parse_device(opts.device)), rng(opts.seed, 0) {
  validate_train_options(options);
  if (options.threads > 0) {
    torch::set_num_threads(options.threads);
    set_blas_threads(options.threads);
  }
  max_tokens = options.max_sequence_tokens > 0 ? options.max_sequence_tokens
                                               : config.max_position_embeddings;
}

Trainer::Impl::Impl(const ModelWeights& initial, const TrainOptions& opts)
    : Impl(initial.config, opts) {
  model = std::make_unique<PolicyModel>(initial, device, torch_dtype(options.compute_dtype),
                                        options.lora, options.seed);
  start_optimizer();
}

Trainer::Impl::Impl(const TensorSource& initial, const TrainOptions& opts)
    : Impl(initial.config(), opts) {
  model = std::make_unique<PolicyModel>(initial, device, torch_dtype(options.compute_dtype),
                                        options.lora, options.seed);
  start_optimizer();
}

void Trainer::Impl::start_optimizer() {
  // LoRA: the adapters only; the base has neither gradients nor AdamW state.
  for (const torch::Tensor& p : model->lora() ? model->adapters() : model->parameters()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  optimizer = std::make_unique<torch::optim::AdamW>(trainable, adamw_options());
}

torch::optim::AdamWOptions Trainer::Impl::adamw_options() const {
  const OptimizerOptions& o = options.optimizer;
  return torch::optim::AdamWOptions(o.lr)
      .betas(std::make_tuple(o.beta1, o.beta2))
      .eps(o.eps)
      .weight_decay(o.weight_decay);
}

void Trainer::Impl::clear_grads() {
  if (sharded) sharded->zero_grads();
  for (torch::Tensor& p : trainable) p.mutable_grad() = torch::Tensor();
}

void Trainer::Impl::forward_backward(
    const torch::Tensor& tokens, const torch::Tensor& positions,
    const std::function<torch::Tensor(const torch::Tensor&)>& loss_of) {
  if (sharded) {
    ShardedPolicy::MicroBatch batch{tokens, positions, loss_of};
    sharded->forward_backward(&batch);
    return;
  }
  torch::Tensor h = model->hidden(tokens);
  torch::Tensor sel = h.reshape({-1, config().hidden_size}).index_select(0, positions);
  loss_of(model->logits(sel)).backward();
}

int64_t Trainer::Impl::micro_batch_rounds(int64_t mine) {
  if (!sharded || !distributed()) return mine;
  const std::vector<int64_t> counts = ranks->all_gather(mine);
  return *std::max_element(counts.begin(), counts.end());
}

void Trainer::Impl::take_part(int64_t rounds) {
  for (int64_t i = 0; i < rounds; ++i) sharded->forward_backward(nullptr);
}

// Measures the global gradient norm, rejects a non-finite step, clips, and runs AdamW at the
// scheduled learning rate.
void Trainer::Impl::apply_gradients(StepMetrics* m, const std::string& batch_name) {
  if (sharded) sharded->attach_grads();  // reduce-scattered during the backward
  if (distributed() && !sharded) sync_gradients();
  double sq = 0.0;
  for (const torch::Tensor& p : trainable) {
    if (!p.grad().defined()) continue;
    // In f64, a million elements at a time: a whole f64 copy of the embedding's gradient (and
    // its square) would be the step's largest allocation after the model state itself.
    const torch::Tensor flat = p.grad().reshape({-1});
    for (int64_t at = 0; at < flat.numel(); at += (1 << 20)) {
      const int64_t n = std::min<int64_t>(1 << 20, flat.numel() - at);
      sq += flat.narrow(0, at, n).to(torch::kFloat64).pow(2).sum().item<double>();
    }
  }
  if (sharded && distributed()) {  // the pieces partition the parameters: sum their squares
    torch::Tensor total = torch::tensor({sq}, torch::kFloat64);
    ranks->all_reduce_sum({total});
    sq = total.item<double>();
  }
  const double norm = std::sqrt(sq);
  if (!std::isfinite(norm) || !std::isfinite(m->loss)) {
    clear_grads();
    fail(ErrorKind::kInvalidArgument, batch_name, " produced a non-finite loss (", m->loss,
         ") or gradient norm (", norm, "); the step was not applied");
  }
  m->grad_norm = norm;
  const double max_norm = options.optimizer.max_grad_norm;
  if (max_norm > 0 && norm > max_norm) {
    torch::NoGradGuard no_grad;
    const double scale = max_norm / (norm + 1e-6);
    for (torch::Tensor& p : trainable) {
      if (p.grad().defined()) p.mutable_grad().mul_(scale);
    }
  }
  m->lr = scheduled_lr(options.optimizer, options.schedule, step);
  for (auto& group : optimizer->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(m->lr);
  }
  optimizer->step();  // data parallel: this rank's shard only
  clear_grads();
  ++step;
  m->step = step;
  if (distributed() && !sharded) {
    sync_parameters();
    if (ranks->options().hash_check_every > 0 && step % ranks->options().hash_check_every == 0)
      check_hashes();
  }
}

namespace {
// LoRA trains on one process or on data-parallel (zero1) ranks, which all-reduce the adapters'
// gradients only (docs/design/train.md, "LoRA"); the fully sharded trainer shards the masters
// and has no adapters yet.
void check_lora_placement(const TrainOptions& options) {
  STOA_CHECK(!options.lora.enabled() || options.sharding == Sharding::kZero1,
             ErrorKind::kUnsupported,
             "LoRA does not train with sharding = fsdp yet; use sharding = zero1 (one process or "
             "data-parallel ranks)");
}
}  // namespace

Trainer::Trainer(const ModelWeights& initial, const TrainOptions& options,
                 std::shared_ptr<Communicator> ranks) {
  check_lora_placement(options);
  if (options.sharding == Sharding::kFsdp) {
    WeightsTensorSource source(initial);
    impl_ = std::make_unique<Impl>(initial.config, options_for_rank(options, ranks.get()));
    impl_->start_sharded(std::move(ranks), &source, "");
    return;
  }
  impl_ = std::make_unique<Impl>(initial, options_for_rank(options, ranks.get()));
  impl_->join(std::move(ranks));
}

Trainer::Trainer(const TensorSource& initial, const TrainOptions& options,
                 std::shared_ptr<Communicator> ranks) {
  check_lora_placement(options);
  if (options.sharding == Sharding::kFsdp) {
    impl_ = std::make_unique<Impl>(initial.config(), options_for_rank(options, ranks.get()));
    impl_->start_sharded(std::move(ranks), &initial, "");
    return;
  }
  impl_ = std::make_unique<Impl>(initial, options_for_rank(options, ranks.get()));
  impl_->join(std::move(ranks));
}
Trainer::Trainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer::~Trainer() = default;
Trainer::Trainer(Trainer&&) noexcept = default;
Trainer& Trainer::operator=(Trainer&&) noexcept = default;

const ModelConfig& Trainer::config() const {
  return impl_->config();
}
const TrainOptions& Trainer::options() const {
  return impl_->options;
}
int64_t Trainer::step_count() const {
  return impl_->step;
}
uint64_t Trainer::next_random() {
  return impl_->rng.next();
}

template <typename Sequences, typename LossOf>
StepMetrics Trainer::Impl::accumulate_and_apply(Sequences seqs, StepMetrics m, double scale,
                                                int64_t topk, const LossOf& loss_of,
                                                const std::string& batch_name,
                                                std::chrono::steady_clock::time_point start) {
  m.sequences = static_cast<int64_t>(seqs.size());
  keep_share(&seqs, ranks.get());
  MetricSums sums;
  clear_grads();
  // LoRA dropout draws from libtorch's generator: seeded by the step, so a resumed run drops
  // the same elements as one that never stopped.
  if (model && model->lora() && options.lora.dropout > 0)
    torch::manual_seed(Rng(options.seed, static_cast<uint64_t>(step) + 1).next());
  try {
    const auto plan = plan_micro_batches(&seqs, options.micro_batch_tokens);
    const int64_t rounds = micro_batch_rounds(static_cast<int64_t>(plan.size()));
    for (auto [begin, end] : plan) {
      MicroBatch mb = make_micro_batch(seqs, begin, end, scale, topk, device);
      m.tokens_total += mb.real_tokens;
      forward_backward(mb.tokens, mb.positions, [&](const torch::Tensor& logits) {
        torch::Tensor loss = loss_of(mb, logits, sums);
        m.loss += loss.item<double>();
        return loss;
      });
    }
    take_part(rounds - static_cast<int64_t>(plan.size()));
  } catch (...) {
    clear_grads();
    throw;
  }
  if (distributed()) reduce_metrics(&sums, &m);
  sums.finish(&m);
  apply_gradients(&m, batch_name);
  m.seconds = seconds_since(start);
  m.tokens_per_second = m.seconds > 0 ? static_cast<double>(m.tokens_total) / m.seconds : 0.0;
  return m;
}

int64_t Trainer::max_tokens() const {
  return impl_->max_tokens;
}

StepMetrics Trainer::train_step(const std::vector<RolloutGroup>& groups) {
  if (impl_->distributed()) impl_->send(kCommandRlStep, encode_groups(groups));
  return impl_->rl_step(groups);
}

StepMetrics Trainer::Impl::rl_step(const std::vector<RolloutGroup>& groups) {
  Impl& im = *this;
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig& config = im.config();
  const LossConfig& loss_config = im.options.loss;
  // Everything is checked before anything runs: a bad rollout never reaches the model.
  validate_groups(groups, config.vocab_size, im.max_tokens);
  int64_t topk = 0;
  bool all_topk = true;
  for (const RolloutGroup& g : groups) {
    for (const Rollout& r : g.rollouts) {
      if (topk == 0) topk = r.topk;
      all_topk = all_topk && r.topk > 0 && r.topk == topk;
      if (loss_needs_topk(loss_config.kind) && (r.topk == 0 || r.topk != topk)) {
        fail(ErrorKind::kInvalidArgument, "rollout '", r.id, "' of group '", g.id, "' has top-",
             r.topk, " log-probs; the ", loss_kind_name(loss_config.kind),
             " loss needs the same top-K (", topk, ") on every rollout");
      }
    }
  }
  if (!all_topk) topk = 0;  // mixed reports: binary divergences for everything

  std::vector<Sequence> seqs;
  int64_t trainable_tokens = 0;
  for (const RolloutGroup& g : groups) {
    std::vector<double> adv = group_advantages(g, loss_config.advantage);
    for (size_t i = 0; i < g.rollouts.size(); ++i) {
      const Rollout& r = g.rollouts[i];
      seqs.push_back({&r.tokens, &r, nullptr, adv[i]});
      trainable_tokens += std::count(r.trainable.begin(), r.trainable.end(), uint8_t{1});
    }
  }
  const double denominator = loss_config.aggregation == Aggregation::kTokenMean
                                 ? static_cast<double>(trainable_tokens)
                                 : loss_config.sequence_constant * static_cast<double>(seqs.size());
  StepMetrics m;
  m.tokens = trainable_tokens;
  const double temperature = im.options.temperature;
  auto loss_of = [&](const MicroBatch& mb, const torch::Tensor& raw, MetricSums& sums) {
    torch::Tensor logits = raw;
    if (temperature != 1.0) logits = logits / temperature;
    ScoredTokens scored = score_tokens(logits, mb.targets, mb.topk_ids);
    LossInputs in{scored.logp, mb.mu_logp,       mb.advantage,
                  mb.weight,   scored.topk_logp, mb.topk_mu_logp};
    LossTerms terms = policy_loss(loss_config, in);
    sums.add(in, terms, scored.entropy);
    return terms.loss;
  };
  return im.accumulate_and_apply(
      std::move(seqs), m, 1.0 / denominator, topk, loss_of,
      cat("rollout batch (", groups.size(), " groups, first '", groups.front().id, "')"), start);
}

StepMetrics Trainer::sft_step(const std::vector<SftExample>& batch) {
  if (impl_->distributed()) impl_->send(kCommandSftStep, encode_sft_batch(batch));
  return impl_->supervised_step(batch);
}

StepMetrics Trainer::Impl::supervised_step(const std::vector<SftExample>& batch) {
  Impl& im = *this;
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig& config = im.config();
  STOA_CHECK(!batch.empty(), ErrorKind::kInvalidArgument, "the SFT batch is empty");
  std::vector<Sequence> seqs;
  int64_t targets = 0;
  for (const SftExample& ex : batch) {
    const std::string name = cat("SFT example '", ex.id, "'");
    STOA_CHECK(ex.tokens.size() >= 2, ErrorKind::kInvalidArgument, name, " has ", ex.tokens.size(),
               " tokens; it needs at least 2");
    STOA_CHECK(static_cast<int64_t>(ex.tokens.size()) <= im.max_tokens, ErrorKind::kInvalidArgument,
               name, " has ", ex.tokens.size(), " tokens, more than the trainer's limit of ",
               im.max_tokens);
    STOA_CHECK(ex.mask.size() == ex.tokens.size(), ErrorKind::kInvalidArgument, name, " has ",
               ex.mask.size(), " mask entries for ", ex.tokens.size(), " tokens");
    for (size_t t = 0; t < ex.tokens.size(); ++t) {
      STOA_CHECK(ex.tokens[t] >= 0 && ex.tokens[t] < config.vocab_size, ErrorKind::kInvalidArgument,
                 name, ": token ", t, " has id ", ex.tokens[t], ", outside the vocabulary [0, ",
                 config.vocab_size, ")");
      if (t > 0) targets += ex.mask[t] != 0;
    }
    seqs.push_back({&ex.tokens, nullptr, &ex.mask, 0.0});
  }
  STOA_CHECK(targets > 0, ErrorKind::kInvalidArgument,
             "the SFT batch has no masked (target) tokens after position 0");
  StepMetrics m;
  m.tokens = targets;
  auto loss_of = [](const MicroBatch& mb, const torch::Tensor& logits, MetricSums& sums) {
    ScoredTokens scored = score_tokens(logits, mb.targets, {});
    torch::Tensor loss = -(mb.weight * scored.logp).sum();
    sums.add_sft(scored.logp, scored.entropy);
    return loss;
  };
  return im.accumulate_and_apply(std::move(seqs), m, 1.0 / static_cast<double>(targets), 0, loss_of,
                                 cat("SFT batch (first example '", batch.front().id, "')"), start);
}

Tensor Trainer::logits(const std::vector<int32_t>& tokens) const {
  const ModelConfig& config = impl_->config();
  STOA_CHECK(!tokens.empty(), ErrorKind::kInvalidArgument, "logits() needs at least one token");
  std::vector<int64_t> ids;
  for (int32_t t : tokens) {
    STOA_CHECK(t >= 0 && t < config.vocab_size, ErrorKind::kInvalidArgument, "token id ", t,
               " is outside the vocabulary [0, ", config.vocab_size, ")");
    ids.push_back(t);
  }
  torch::NoGradGuard no_grad;
  torch::Tensor input =
      torch::from_blob(ids.data(), {1, static_cast<int64_t>(ids.size())}, torch::kInt64).clone();
  if (impl_->fsdp()) return from_torch(impl_->sharded_logits(input).squeeze(0));
  torch::Tensor h = impl_->model->hidden(input);
  return from_torch(impl_->model->logits(h).squeeze(0));
}

std::vector<float> Trainer::token_logprobs(const std::vector<int32_t>& tokens) const {
  torch::Tensor logit = to_torch(logits(tokens));
  if (impl_->options.temperature != 1.0) logit = logit / impl_->options.temperature;
  torch::Tensor lsm = torch::log_softmax(logit, -1);
  std::vector<float> out(tokens.size(), 0.0f);
  for (size_t t = 1; t < tokens.size(); ++t) {
    out[t] = lsm[static_cast<int64_t>(t) - 1][tokens[t]].item<float>();
  }
  return out;
}

ModelWeights Trainer::weights() const {
  ModelWeights out;
  copy_weights_to(&out);
  return out;
}

void Trainer::copy_weights_to(ModelWeights* out) const {
  if (!impl_->fsdp()) {
    impl_->model->copy_to(out);
    return;
  }
  out->config = impl_->config();
  for_each_weight([&](const std::string& name, const Shape& shape, const float* values) {
    auto it = out->tensors.find(name);
    if (it == out->tensors.end() || it->second.dtype() != DType::kF32 ||
        it->second.shape() != shape) {
      it = out->tensors.insert_or_assign(name, Tensor(DType::kF32, shape)).first;
    }
    std::memcpy(it->second.data(), values, it->second.nbytes());
  });
}

void Trainer::for_each_weight(
    const std::function<void(const std::string&, const Shape&, const float*)>& take) const {
  auto give = [&](const std::string& name, const torch::Tensor& tensor) {
    // A no-op (the parameter itself) for an f32 master on the CPU.
    torch::Tensor host = tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    take(name, Shape(host.sizes().begin(), host.sizes().end()), host.data_ptr<float>());
  };
  if (impl_->fsdp()) {
    impl_->gather_weights(give);  // FSDP: one unit gathered at a time, in name order
    return;
  }
  const PolicyModel& model = *impl_->model;
  std::vector<size_t> order(model.names().size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return model.names()[a] < model.names()[b]; });
  for (size_t i : order) {
    // LoRA: the merged view, made for one tensor at a time (never a whole f32 copy).
    if (model.lora()) {
      give(model.names()[i], model.merged(model.names()[i]));
    } else {
      give(model.names()[i], model.parameters()[i]);
    }
  }
}

void Trainer::for_each_adapter(
    const std::function<void(const std::string&, const Shape&, const float*)>& take) const {
  if (impl_->fsdp()) return;
  const PolicyModel& model = *impl_->model;
  for (size_t i = 0; i < model.adapters().size(); ++i) {
    torch::Tensor host = model.adapters()[i].detach().to(torch::kCPU, torch::kFloat32).contiguous();
    take(model.adapter_names()[i], Shape(host.sizes().begin(), host.sizes().end()),
         host.data_ptr<float>());
  }
}

std::string Trainer::base_hash() const {
  STOA_CHECK(!impl_->fsdp(), ErrorKind::kUnsupported, "base_hash() is one process's");
  return impl_->model->parameters_hash().hex();
}

}  // namespace stoa::train
