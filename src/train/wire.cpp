// CBOR payloads of the data-parallel command channel (wire.h).
#include "train/wire.h"

#include "core/error.h"

namespace stoa::train {
namespace {

nlohmann::json parse_cbor(const std::string& bytes, const char* what) {
  try {
    return nlohmann::json::from_cbor(bytes);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadFormat, "the leader's ", what, " is not valid CBOR: ", e.what());
  }
}

}  // namespace

std::string encode_groups(const std::vector<RolloutGroup>& groups) {
  nlohmann::json out = nlohmann::json::array();
  for (const RolloutGroup& g : groups) {
    nlohmann::json rollouts = nlohmann::json::array();
    for (const Rollout& r : g.rollouts) {
      rollouts.push_back({{"id", r.id},
                          {"tokens", r.tokens},
                          {"trainable", r.trainable},
                          {"mu", r.behaviour_logprobs},
                          {"topk", r.topk},
                          {"topk_ids", r.topk_ids},
                          {"topk_mu", r.topk_logprobs},
                          {"reward", r.reward},
                          {"version", r.policy_version}});
    }
    out.push_back({{"id", g.id}, {"rollouts", std::move(rollouts)}});
  }
  std::vector<uint8_t> cbor = nlohmann::json::to_cbor(out);
  return std::string(cbor.begin(), cbor.end());
}

std::vector<RolloutGroup> decode_groups(const std::string& bytes) {
  const nlohmann::json in = parse_cbor(bytes, "rollout batch");
  std::vector<RolloutGroup> groups;
  for (const nlohmann::json& g : in) {
    RolloutGroup group;
    group.id = g.at("id").get<std::string>();
    for (const nlohmann::json& r : g.at("rollouts")) {
      Rollout rollout;
      rollout.id = r.at("id").get<std::string>();
      rollout.tokens = r.at("tokens").get<std::vector<int32_t>>();
      rollout.trainable = r.at("trainable").get<std::vector<uint8_t>>();
      rollout.behaviour_logprobs = r.at("mu").get<std::vector<float>>();
      rollout.topk = r.at("topk").get<int32_t>();
      rollout.topk_ids = r.at("topk_ids").get<std::vector<int32_t>>();
      rollout.topk_logprobs = r.at("topk_mu").get<std::vector<float>>();
      rollout.reward = r.at("reward").get<double>();
      rollout.policy_version = r.at("version").get<int64_t>();
      group.rollouts.push_back(std::move(rollout));
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

std::string encode_sft_batch(const std::vector<SftExample>& batch) {
  nlohmann::json out = nlohmann::json::array();
  for (const SftExample& ex : batch) {
    out.push_back({{"id", ex.id}, {"tokens", ex.tokens}, {"mask", ex.mask}});
  }
  std::vector<uint8_t> cbor = nlohmann::json::to_cbor(out);
  return std::string(cbor.begin(), cbor.end());
}

std::vector<SftExample> decode_sft_batch(const std::string& bytes) {
  const nlohmann::json in = parse_cbor(bytes, "SFT batch");
  std::vector<SftExample> batch;
  for (const nlohmann::json& ex : in) {
    batch.push_back({ex.at("id").get<std::string>(), ex.at("tokens").get<std::vector<int32_t>>(),
                     ex.at("mask").get<std::vector<uint8_t>>()});
  }
  return batch;
}

nlohmann::json train_options_to_json(const TrainOptions& o) {
  const LossConfig& l = o.loss;
  return {{"device", o.device},
          {"compute_dtype", dtype_name(o.compute_dtype)},
          {"threads", o.threads},
          {"lr", o.optimizer.lr},
          {"beta1", o.optimizer.beta1},
          {"beta2", o.optimizer.beta2},
          {"eps", o.optimizer.eps},
          {"weight_decay", o.optimizer.weight_decay},
          {"max_grad_norm", o.optimizer.max_grad_norm},
          {"schedule", schedule_kind_name(o.schedule.kind)},
          {"warmup_steps", o.schedule.warmup_steps},
          {"total_steps", o.schedule.total_steps},
          {"min_lr_ratio", o.schedule.min_lr_ratio},
          {"loss", loss_kind_name(l.kind)},
          {"delta_hi", l.delta_hi},
          {"delta_lo", l.delta_lo},
          {"clip_eps_hi", l.clip_eps_hi},
          {"clip_eps_lo", l.clip_eps_lo},
          // CBOR keeps infinity (JSON text would not): the default ratio cap is +inf.
          {"ratio_cap", l.ratio_cap},
          {"advantage", advantage_kind_name(l.advantage)},
          {"aggregation", aggregation_name(l.aggregation)},
          {"sequence_constant", l.sequence_constant},
          {"kl_eps", l.kl_eps},
          {"micro_batch_tokens", o.micro_batch_tokens},
          {"sharding", sharding_name(o.sharding)},
          {"max_sequence_tokens", o.max_sequence_tokens},
          {"seed", o.seed},
          {"temperature", o.temperature},
          // LoRA: the followers build the same adapters (rank 0's values arrive in
          // exchange_state); init_adapter stays on rank 0, whose adapters they receive.
          {"lora_rank", o.lora.rank},
          {"lora_alpha", o.lora.alpha},
          {"lora_dropout", o.lora.dropout},
          {"lora_targets", o.lora.targets},
          {"lora_base_dtype", dtype_name(o.lora.base_dtype)}};
}

TrainOptions train_options_from_json(const nlohmann::json& j) {
  TrainOptions o;
  o.device = j.at("device").get<std::string>();
  STOA_CHECK(parse_dtype(j.at("compute_dtype").get<std::string>(), &o.compute_dtype),
             ErrorKind::kBadFormat, "the leader's compute dtype is unknown");
  o.threads = j.at("threads").get<int>();
  o.optimizer.lr = j.at("lr").get<double>();
  o.optimizer.beta1 = j.at("beta1").get<double>();
  o.optimizer.beta2 = j.at("beta2").get<double>();
  o.optimizer.eps = j.at("eps").get<double>();
  o.optimizer.weight_decay = j.at("weight_decay").get<double>();
  o.optimizer.max_grad_norm = j.at("max_grad_norm").get<double>();
  o.schedule.kind = parse_schedule_kind(j.at("schedule").get<std::string>());
  o.schedule.warmup_steps = j.at("warmup_steps").get<int64_t>();
  o.schedule.total_steps = j.at("total_steps").get<int64_t>();
  o.schedule.min_lr_ratio = j.at("min_lr_ratio").get<double>();
  LossConfig& l = o.loss;
  l.kind = parse_loss_kind(j.at("loss").get<std::string>());
  l.delta_hi = j.at("delta_hi").get<double>();
  l.delta_lo = j.at("delta_lo").get<double>();
  l.clip_eps_hi = j.at("clip_eps_hi").get<double>();
  l.clip_eps_lo = j.at("clip_eps_lo").get<double>();
  l.ratio_cap = j.at("ratio_cap").get<double>();
  l.advantage = parse_advantage_kind(j.at("advantage").get<std::string>());
  l.aggregation = parse_aggregation(j.at("aggregation").get<std::string>());
  l.sequence_constant = j.at("sequence_constant").get<double>();
  l.kl_eps = j.at("kl_eps").get<double>();
  o.micro_batch_tokens = j.at("micro_batch_tokens").get<int64_t>();
  o.sharding = parse_sharding(j.value("sharding", "zero1"));
  o.max_sequence_tokens = j.at("max_sequence_tokens").get<int64_t>();
  o.seed = j.at("seed").get<uint64_t>();
  o.temperature = j.at("temperature").get<double>();
  o.lora.rank = j.value("lora_rank", int64_t{0});
  if (o.lora.enabled()) {
    o.lora.alpha = j.at("lora_alpha").get<double>();
    o.lora.dropout = j.at("lora_dropout").get<double>();
    o.lora.targets = j.at("lora_targets").get<std::vector<std::string>>();
    STOA_CHECK(parse_dtype(j.at("lora_base_dtype").get<std::string>(), &o.lora.base_dtype),
               ErrorKind::kBadFormat, "the leader's LoRA base dtype is unknown");
  }
  return o;
}

}  // namespace stoa::train
