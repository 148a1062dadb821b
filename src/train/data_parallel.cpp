// Data-parallel training (docs/design/distributed-trainer.md): the command channel from rank 0,
// the followers' loop, gradient all-reduce, ZeRO-1 optimizer sharding, parameter hashes.
//
// ZeRO-1 on Debian's libtorch 1.13 Gloo: its reduce_scatter and _allgather_base are not usable
// on CPU tensors, so the reduce-scatter is an all-reduce of which each rank keeps its shard's
// part, and the all-gather is one broadcast per shard owner. The AdamW state (two f32 moments
// per parameter, the largest part of the training memory) lives only on the owner, and moves
// (at start, for a checkpoint) only between its owner and rank 0.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "model/config.h"
#include "train/torch_compat.h"
#include "train/trainer_impl.h"
#include "train/wire.h"

namespace stoa::train {
namespace {

// FNV-1a over 64-bit words (then the tail bytes): cheap enough to run over every parameter.
uint64_t hash_parameters(const std::vector<torch::Tensor>& params) {
  uint64_t h = 1469598103934665603ull;
  for (const torch::Tensor& p : params) {
    torch::Tensor host = p.detach().to(torch::kCPU).contiguous();
    const auto* bytes = static_cast<const unsigned char*>(host.data_ptr());
    const size_t n = host.nbytes();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t word;
      std::memcpy(&word, bytes + i, 8);
      h = (h ^ word) * 1099511628211ull;
    }
    for (; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return h;
}

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

std::pair<int, std::string> receive(Communicator& ranks) {
  std::string bytes;
  ranks.broadcast_bytes(&bytes);
  STOA_CHECK(!bytes.empty(), ErrorKind::kBadFormat, "rank ", ranks.rank(),
             ": an empty command from rank 0");
  return {static_cast<unsigned char>(bytes[0]), bytes.substr(1)};
}

}  // namespace

TrainOptions options_for_rank(TrainOptions options, const Communicator* ranks) {
  if (ranks && ranks->world_size() > 1 && options.device == "cuda") {
    options.device = "cuda:" + std::to_string(ranks->options().local_rank);
  }
  return options;
}

Trainer::Impl::~Impl() {
  if (!distributed() || !ranks->leader()) return;
  try {
    send(kCommandStop, "");
  } catch (const std::exception& e) {
    log_warn("dist", "could not tell the other ranks to stop: ", e.what());
  }
}

void Trainer::Impl::send(int command, const std::string& payload) {
  std::string bytes(1, static_cast<char>(command));
  bytes += payload;
  ranks->broadcast_bytes(&bytes);
}

void Trainer::Impl::join(std::shared_ptr<Communicator> group) {
  if (!group || group->world_size() == 1) return;
  STOA_CHECK(group->leader(), ErrorKind::kInvalidArgument,
             "a data-parallel Trainer is built on rank 0; rank ", group->rank(),
             " runs Trainer::follow");
  ranks = std::move(group);
  nlohmann::json init = {{"options", train_options_to_json(options)},
                         {"config", model_config_to_json(model->config())},
                         {"step", step}};
  std::vector<uint8_t> cbor = nlohmann::json::to_cbor(init);
  send(kCommandInit, std::string(cbor.begin(), cbor.end()));
  exchange_state();
}

// Collective, right after kCommandInit: rank 0's weights and whole AdamW state reach every rank
// (the resume case carries moments), then each rank keeps an optimizer over its own shard.
void Trainer::Impl::exchange_state() {
  torch::NoGradGuard no_grad;
  const int world = ranks->world_size();
  const size_t count = trainable.size();
  // Owners: largest tensors first, each to the least-loaded rank (deterministic on every rank).
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return trainable[a].numel() > trainable[b].numel(); });
  std::vector<int64_t> load(static_cast<size_t>(world), 0);
  owner.assign(count, 0);
  for (size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    owner[i] = static_cast<int>(least);
    load[static_cast<size_t>(least)] += trainable[i].numel();
  }
  // Gloo (libtorch 1.13) has neither bf16 nor int16 collectives; a broadcast only copies bytes,
  // so a bf16 tensor (a LoRA base) travels as f16 through a view of its own storage.
  std::vector<torch::Tensor> held;
  for (const torch::Tensor& p : model->parameters())
    held.push_back(p.scalar_type() == torch::kBFloat16 ? p.view(torch::kHalf) : p);
  ranks->broadcast(held, 0);
  // LoRA: the adapters too (rank 0's may come from a PEFT adapter or a checkpoint).
  if (model->lora()) ranks->broadcast(model->adapters(), 0);
  // steps[i] = AdamW step count + 1 where the leader has state for tensor i, else 0.
  torch::Tensor steps = torch::zeros({static_cast<int64_t>(count)}, torch::kInt64);
  if (ranks->leader()) {
    for (size_t i = 0; i < count; ++i) {
      auto it = optimizer->state().find(optimizer_state_key(trainable[i]));
      if (it == optimizer->state().end()) continue;
      steps[static_cast<int64_t>(i)] =
          static_cast<torch::optim::AdamWParamState&>(*it->second).step() + 1;
    }
  }
  ranks->broadcast({steps}, 0);
  // Each tensor's moments go from the leader to their owner only: no rank allocates moments it
  // does not keep (the leader already holds them all when it resumed a checkpoint).
  std::vector<torch::Tensor> mine;
  for (size_t i = 0; i < count; ++i) {
    if (owner[i] == ranks->rank()) mine.push_back(trainable[i]);
  }
  auto sharded = std::make_unique<torch::optim::AdamW>(mine, adamw_options());
  for (size_t i = 0; i < count; ++i) {
    const int64_t s = steps[static_cast<int64_t>(i)].item<int64_t>();
    if (s == 0) continue;
    const bool keep = owner[i] == ranks->rank();
    torch::Tensor exp_avg, exp_avg_sq;
    if (ranks->leader()) {
      auto& st = static_cast<torch::optim::AdamWParamState&>(
          *optimizer->state()[optimizer_state_key(trainable[i])]);
      exp_avg = st.exp_avg().contiguous();
      exp_avg_sq = st.exp_avg_sq().contiguous();
    } else if (keep) {
      exp_avg = torch::zeros_like(trainable[i]);
      exp_avg_sq = torch::zeros_like(trainable[i]);
    }
    const int64_t n = trainable[i].numel();
    if (owner[i] != 0) {  // the leader's own tensors need no message
      ranks->send_through(keep || ranks->leader() ? exp_avg : torch::Tensor(), n, 0);
      ranks->send_through(keep || ranks->leader() ? exp_avg_sq : torch::Tensor(), n, 0);
    }
    if (keep) {
      auto st = std::make_unique<torch::optim::AdamWParamState>();
      st->step(s - 1);
      st->exp_avg(exp_avg);  // the leader's old optimizer goes below; its tensors stay here
      st->exp_avg_sq(exp_avg_sq);
      sharded->state()[optimizer_state_key(trainable[i])] = std::move(st);
    }
  }
  optimizer = std::move(sharded);
  log_info("dist", "rank ", ranks->rank(), ": ", mine.size(), " of ", count,
           " tensors' AdamW state here (", load[static_cast<size_t>(ranks->rank())], " of ",
           std::accumulate(load.begin(), load.end(), int64_t{0}), " parameters)");
}

void Trainer::Impl::reduce_metrics(MetricSums* sums, StepMetrics* metrics) {
  std::vector<double*> fields = sums->sum_fields();
  double tokens_total = static_cast<double>(metrics->tokens_total);
  fields.push_back(&metrics->loss);
  fields.push_back(&tokens_total);
  torch::Tensor values = torch::empty({static_cast<int64_t>(fields.size())}, torch::kFloat64);
  for (size_t i = 0; i < fields.size(); ++i) values[static_cast<int64_t>(i)] = *fields[i];
  ranks->all_reduce_sum({values});
  for (size_t i = 0; i < fields.size(); ++i)
    *fields[i] = values[static_cast<int64_t>(i)].item<double>();
  metrics->tokens_total = static_cast<int64_t>(tokens_total);
  std::vector<double*> maxima = sums->max_fields();
  torch::Tensor top = torch::empty({static_cast<int64_t>(maxima.size())}, torch::kFloat64);
  for (size_t i = 0; i < maxima.size(); ++i) top[static_cast<int64_t>(i)] = *maxima[i];
  ranks->all_reduce_max(top);
  for (size_t i = 0; i < maxima.size(); ++i)
    *maxima[i] = top[static_cast<int64_t>(i)].item<double>();
}

// A tensor no rank produced a gradient for (an expert no token reached) keeps no gradient, as in
// one process: AdamW then leaves it and its moments alone.
void Trainer::Impl::sync_gradients() {
  torch::NoGradGuard no_grad;
  torch::Tensor defined = torch::zeros({static_cast<int64_t>(trainable.size())}, torch::kFloat32);
  for (size_t i = 0; i < trainable.size(); ++i) {
    if (trainable[i].grad().defined()) defined[static_cast<int64_t>(i)] = 1.0f;
  }
  ranks->all_reduce_sum({defined});
  std::vector<torch::Tensor> grads;
  for (size_t i = 0; i < trainable.size(); ++i) {
    if (defined[static_cast<int64_t>(i)].item<float>() == 0.0f) continue;
    if (!trainable[i].grad().defined())
      trainable[i].mutable_grad() = torch::zeros_like(trainable[i]);
    grads.push_back(trainable[i].grad());
  }
  ranks->all_reduce_sum(grads);
  ++ranks->stats().steps;
}

void Trainer::Impl::sync_parameters() {
  for (int r = 0; r < ranks->world_size(); ++r) {
    std::vector<torch::Tensor> shard;
    for (size_t i = 0; i < trainable.size(); ++i) {
      if (owner[i] == r) shard.push_back(trainable[i]);
    }
    ranks->broadcast(shard, r);
  }
}

void Trainer::Impl::check_hashes() {
  std::vector<torch::Tensor> held = model->parameters();
  held.insert(held.end(), model->adapters().begin(), model->adapters().end());  // LoRA
  const uint64_t mine = hash_parameters(held);
  const std::vector<int64_t> all = ranks->all_gather(static_cast<int64_t>(mine));
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    diverged = true;
    fail(ErrorKind::kIntegrity, "data-parallel ranks diverged after step ", step,
         ": the parameters of rank ", r, " hash to ", hex(static_cast<uint64_t>(all[r])),
         ", rank 0's to ", hex(static_cast<uint64_t>(all[0])),
         "; every rank must hold the same weights, so the run stops");
  }
}

std::unique_ptr<torch::optim::AdamW> Trainer::Impl::gather_optimizer() {
  torch::NoGradGuard no_grad;
  const size_t count = trainable.size();
  torch::Tensor steps = torch::zeros({static_cast<int64_t>(count)}, torch::kInt64);
  for (size_t i = 0; i < count; ++i) {
    if (owner[i] != ranks->rank()) continue;
    auto it = optimizer->state().find(optimizer_state_key(trainable[i]));
    if (it != optimizer->state().end()) {
      steps[static_cast<int64_t>(i)] =
          static_cast<torch::optim::AdamWParamState&>(*it->second).step() + 1;
    }
  }
  ranks->all_reduce_sum({steps});
  // Each owner's moments reach the leader only (the others take part through a scratch bucket).
  std::vector<torch::Tensor> exp_avg(count), exp_avg_sq(count);
  for (size_t i = 0; i < count; ++i) {
    if (steps[static_cast<int64_t>(i)].item<int64_t>() == 0) continue;
    if (owner[i] == ranks->rank()) {
      auto& st = static_cast<torch::optim::AdamWParamState&>(
          *optimizer->state()[optimizer_state_key(trainable[i])]);
      exp_avg[i] = st.exp_avg().contiguous();
      exp_avg_sq[i] = st.exp_avg_sq().contiguous();
    } else if (ranks->leader()) {
      exp_avg[i] = torch::zeros_like(trainable[i]);
      exp_avg_sq[i] = torch::zeros_like(trainable[i]);
    }
    if (owner[i] == 0) continue;
    ranks->send_through(exp_avg[i], trainable[i].numel(), owner[i]);
    ranks->send_through(exp_avg_sq[i], trainable[i].numel(), owner[i]);
  }
  if (!ranks->leader()) return nullptr;
  auto full = std::make_unique<torch::optim::AdamW>(trainable, adamw_options());
  for (auto& group : full->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options())
        .lr(static_cast<torch::optim::AdamWOptions&>(optimizer->param_groups()[0].options()).lr());
  }
  for (size_t i = 0; i < count; ++i) {
    const int64_t s = steps[static_cast<int64_t>(i)].item<int64_t>();
    if (s == 0) continue;
    auto st = std::make_unique<torch::optim::AdamWParamState>();
    st->step(s - 1);
    st->exp_avg(exp_avg[i]);
    st->exp_avg_sq(exp_avg_sq[i]);
    full->state()[optimizer_state_key(trainable[i])] = std::move(st);
  }
  return full;
}

RankHoldings Trainer::Impl::own_holdings() const {
  RankHoldings h;
  if (sharded) {
    for (size_t u = 0; u < sharded->layout().units.size(); ++u) {
      h.masters += sharded->master(u).numel();
      h.gradients += sharded->master(u).numel();  // one gradient buffer per shard
    }
  } else {
    for (const torch::Tensor& p : model->parameters()) h.masters += p.numel();
    for (const torch::Tensor& p : trainable) h.gradients += p.numel();
  }
  for (const auto& [key, state] : optimizer->state()) {
    const auto& st = static_cast<const torch::optim::AdamWParamState&>(*state);
    h.moments += st.exp_avg().numel() + st.exp_avg_sq().numel();
  }
  return h;
}

std::vector<RankHoldings> Trainer::Impl::gather_holdings() {
  const RankHoldings mine = own_holdings();
  if (!distributed()) return {mine};
  const std::vector<int64_t> masters = ranks->all_gather(mine.masters);
  const std::vector<int64_t> gradients = ranks->all_gather(mine.gradients);
  const std::vector<int64_t> moments = ranks->all_gather(mine.moments);
  std::vector<RankHoldings> all;
  for (size_t r = 0; r < masters.size(); ++r) all.push_back({masters[r], gradients[r], moments[r]});
  return all;
}

std::vector<RankHoldings> Trainer::holdings() const {
  if (impl_->distributed()) impl_->send(kCommandHoldings, "");
  return impl_->gather_holdings();
}

void Trainer::follow(std::shared_ptr<Communicator> ranks) {
  STOA_CHECK(ranks && !ranks->leader(), ErrorKind::kInvalidArgument,
             "Trainer::follow runs on ranks other than 0");
  auto [command, payload] = receive(*ranks);
  STOA_CHECK(command == kCommandInit, ErrorKind::kBadFormat, "rank ", ranks->rank(),
             ": rank 0 stopped before it sent its trainer (command ", command, ")");
  const nlohmann::json init = nlohmann::json::from_cbor(payload);
  const TrainOptions options =
      options_for_rank(train_options_from_json(init.at("options")), ranks.get());
  const ModelConfig config = parse_model_config(init.at("config").dump(), "rank 0's model config");
  std::unique_ptr<Impl> impl;
  if (options.sharding == Sharding::kFsdp) {
    // Rank 0's source, or the checkpoint's shards, fill this rank's slice only.
    impl = std::make_unique<Impl>(config, options);
    impl->ranks = ranks;
    impl->step = init.at("step").get<int64_t>();
    impl->setup_sharded(nullptr, init.value("resume", ""));
  } else {
    // The values are overwritten by rank 0's weights in exchange_state.
    impl = std::make_unique<Impl>(random_weights(config, 0), options);
    impl->ranks = ranks;
    impl->step = init.at("step").get<int64_t>();
    impl->exchange_state();
  }
  while (true) {
    std::tie(command, payload) = receive(*ranks);
    try {
      switch (command) {
        case kCommandRlStep:
          impl->rl_step(decode_groups(payload));
          break;
        case kCommandSftStep:
          impl->supervised_step(decode_sft_batch(payload));
          break;
        case kCommandGatherOptimizer:
          impl->gather_optimizer();
          break;
        case kCommandLogits: {
          const int64_t n = static_cast<int64_t>(payload.size() / sizeof(int64_t));
          torch::Tensor tokens = torch::from_blob(payload.data(), {1, n}, torch::kInt64).clone();
          impl->sharded->logits(tokens);
          break;
        }
        case kCommandGatherWeights:
          impl->sharded->gather_all(nullptr);
          break;
        case kCommandGatherChosen:
          impl->gather_chosen_follower();
          break;
        case kCommandSaveShards:
          impl->save_shards(payload);
          break;
        case kCommandHoldings:
          impl->gather_holdings();
          break;
        case kCommandStop:
          impl->ranks.reset();  // nothing more to tell anyone
          return;
        default:
          fail(ErrorKind::kBadFormat, "rank ", ranks->rank(), ": unknown command ", command,
               " from rank 0");
      }
    } catch (const stoa::Error& e) {
      // Rank 0 rejected the same batch the same way (validation, a non-finite step) and carries
      // on; a lost rank or diverged weights end the run here too.
      if (impl->diverged || e.kind() == ErrorKind::kNetwork) throw;
      log_warn("dist", "rank ", ranks->rank(), ": step rejected as on rank 0: ", e.what());
    }
  }
}

}  // namespace stoa::train
