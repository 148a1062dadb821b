// Names, validation and the learning-rate schedule of the trainer options (torch-free).
#include <cmath>
#include <numbers>

#include "core/enum_names.h"
#include "core/error.h"
#include "train/loss_config.h"
#include "train/train_options.h"

namespace stoa::train {

constexpr EnumName<LossKind> kLossKindNames[] = {{LossKind::kDppoBinaryTv, "dppo-binary-tv"},
                                                 {LossKind::kDppoBinaryKl, "dppo-binary-kl"},
                                                 {LossKind::kDppoTopkTv, "dppo-topk-tv"},
                                                 {LossKind::kDppoTopkKl, "dppo-topk-kl"},
                                                 {LossKind::kPpoClip, "ppo-clip"},
                                                 {LossKind::kTruncatedIs, "truncated-is"},
                                                 {LossKind::kOnPolicyPg, "on-policy-pg"}};

const char* loss_kind_name(LossKind kind) {
  return enum_name(kLossKindNames, kind);
}

LossKind parse_loss_kind(const std::string& name) {
  if (auto kind = enum_from_name(kLossKindNames, name)) return *kind;
  fail(ErrorKind::kInvalidArgument, "unknown loss '", name, "' (",
       enum_names_joined(kLossKindNames), ")");
}

bool loss_needs_topk(LossKind kind) {
  return kind == LossKind::kDppoTopkTv || kind == LossKind::kDppoTopkKl;
}

constexpr EnumName<Aggregation> kAggregationNames[] = {{Aggregation::kTokenMean, "token-mean"},
                                                       {Aggregation::kSequenceSum, "sequence-sum"}};

const char* aggregation_name(Aggregation aggregation) {
  return enum_name(kAggregationNames, aggregation);
}

Aggregation parse_aggregation(const std::string& name) {
  if (auto aggregation = enum_from_name(kAggregationNames, name)) return *aggregation;
  fail(ErrorKind::kInvalidArgument, "unknown aggregation '", name, "' (",
       enum_names_joined(kAggregationNames), ")");
}

void validate_loss_config(const LossConfig& c) {
  auto positive = [](double v, const char* field) {
    STOA_CHECK(std::isfinite(v) && v > 0, ErrorKind::kInvalidArgument, "loss option ", field,
               " must be finite and > 0 (got ", v, ")");
  };
  positive(c.delta_hi, "delta_hi");
  positive(c.delta_lo, "delta_lo");
  positive(c.clip_eps_hi, "clip_eps_hi");
  positive(c.clip_eps_lo, "clip_eps_lo");
  STOA_CHECK(c.clip_eps_lo < 1.0, ErrorKind::kInvalidArgument,
             "loss option clip_eps_lo must be < 1 (got ", c.clip_eps_lo, ")");
  STOA_CHECK(c.ratio_cap > 0, ErrorKind::kInvalidArgument, "loss option ratio_cap must be > 0");
  STOA_CHECK(c.kind != LossKind::kTruncatedIs || std::isfinite(c.ratio_cap),
             ErrorKind::kInvalidArgument, "the truncated-is loss needs a finite ratio_cap");
  positive(c.sequence_constant, "sequence_constant");
  positive(c.kl_eps, "kl_eps");
}

constexpr EnumName<ScheduleKind> kScheduleKindNames[] = {{ScheduleKind::kConstant, "constant"},
                                                         {ScheduleKind::kCosine, "cosine"}};

const char* schedule_kind_name(ScheduleKind kind) {
  return enum_name(kScheduleKindNames, kind);
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (auto kind = enum_from_name(kScheduleKindNames, name)) return *kind;
  fail(ErrorKind::kInvalidArgument, "unknown schedule '", name, "' (",
       enum_names_joined(kScheduleKindNames), ")");
}

double scheduled_lr(const OptimizerOptions& optimizer, const ScheduleOptions& schedule,
                    int64_t step) {
  const double lr = optimizer.lr;
  if (step < schedule.warmup_steps) {
    return lr * static_cast<double>(step + 1) / static_cast<double>(schedule.warmup_steps);
  }
  if (schedule.kind == ScheduleKind::kConstant) return lr;
  const int64_t decay_steps = schedule.total_steps - schedule.warmup_steps;
  if (decay_steps <= 0) return lr;
  double progress = static_cast<double>(step - schedule.warmup_steps) / decay_steps;
  if (progress > 1.0) progress = 1.0;
  const double min_lr = lr * schedule.min_lr_ratio;
  return min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

constexpr EnumName<Sharding> kShardingNames[] = {{Sharding::kZero1, "zero1"},
                                                 {Sharding::kFsdp, "fsdp"}};

const char* sharding_name(Sharding sharding) {
  return enum_name(kShardingNames, sharding);
}

Sharding parse_sharding(const std::string& name) {
  if (auto sharding = enum_from_name(kShardingNames, name)) return *sharding;
  fail(ErrorKind::kInvalidArgument, "sharding '", name, "' is not zero1 or fsdp");
}

void validate_train_options(const TrainOptions& o) {
  const OptimizerOptions& opt = o.optimizer;
  STOA_CHECK(std::isfinite(opt.lr) && opt.lr >= 0, ErrorKind::kInvalidArgument,
             "optimizer lr must be finite and >= 0 (got ", opt.lr, ")");
  STOA_CHECK(opt.beta1 >= 0 && opt.beta1 < 1 && opt.beta2 >= 0 && opt.beta2 < 1,
             ErrorKind::kInvalidArgument, "optimizer betas must lie in [0, 1) (got ", opt.beta1,
             ", ", opt.beta2, ")");
  STOA_CHECK(opt.eps > 0, ErrorKind::kInvalidArgument, "optimizer eps must be > 0");
  STOA_CHECK(std::isfinite(o.temperature) && o.temperature > 0, ErrorKind::kInvalidArgument,
             "temperature must be finite and > 0 (got ", o.temperature,
             "); greedy decoding has no behaviour log-probs to train on");
  STOA_CHECK(opt.weight_decay >= 0, ErrorKind::kInvalidArgument,
             "optimizer weight_decay must be >= 0");
  STOA_CHECK(o.schedule.warmup_steps >= 0, ErrorKind::kInvalidArgument,
             "schedule warmup_steps must be >= 0");
  STOA_CHECK(o.schedule.kind != ScheduleKind::kCosine || o.schedule.total_steps > 0,
             ErrorKind::kInvalidArgument, "the cosine schedule needs total_steps > 0");
  STOA_CHECK(o.schedule.min_lr_ratio >= 0 && o.schedule.min_lr_ratio <= 1,
             ErrorKind::kInvalidArgument, "schedule min_lr_ratio must lie in [0, 1]");
  STOA_CHECK(o.compute_dtype == DType::kF32 || o.compute_dtype == DType::kBF16 ||
                 o.compute_dtype == DType::kF16,
             ErrorKind::kInvalidArgument, "compute dtype must be f32, bf16 or f16 (got ",
             dtype_name(o.compute_dtype), ")");
  STOA_CHECK(o.threads >= 0, ErrorKind::kInvalidArgument, "threads must be >= 0");
  STOA_CHECK(o.micro_batch_tokens > 0, ErrorKind::kInvalidArgument,
             "micro_batch_tokens must be > 0");
  STOA_CHECK(o.max_sequence_tokens >= 0, ErrorKind::kInvalidArgument,
             "max_sequence_tokens must be >= 0");
  validate_loss_config(o.loss);
  validate_lora_options(o.lora);
}

}  // namespace stoa::train
