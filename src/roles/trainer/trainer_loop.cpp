#include "roles/trainer/trainer_loop.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "env/rollout_rule.h"
#include "model/tensor_source.h"
#include "pulse/model_view.h"

namespace stoa::trainer {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Trainer::save_checkpoint writes <dir>.tmp (trainer.json last), renames <dir> to <dir>.old,
// <dir>.tmp to <dir>, then deletes <dir>.old: a crash leaves a complete checkpoint in <dir>, else
// in <dir>.tmp (the newer), else in <dir>.old. A kill while trainer.json itself was being written
// leaves it torn in <dir>.tmp beside an intact <dir>: only a trainer.json that parses counts.
bool whole_checkpoint(const fs::path& dir) {
  std::ifstream in(dir / "trainer.json", std::ios::binary);
  if (!in) return false;
  const nlohmann::json meta = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return meta.is_object();
}

std::optional<std::string> find_checkpoint(const std::string& dir) {
  if (dir.empty()) return std::nullopt;
  for (const std::string& candidate : {dir, dir + ".tmp", dir + ".old"}) {
    if (whole_checkpoint(candidate)) return candidate;
    if (fs::exists(fs::path(candidate) / "trainer.json"))
      log_warn("trainer", "checkpoint ", candidate, " has a torn trainer.json: not resumed from");
  }
  return std::nullopt;
}

// With skip_uniform_groups: how many groups (with and without signal) one gather may hold.
constexpr size_t kMaxGatherFactor = 4;

const Clock::time_point kEpoch = Clock::now();  // process start: elapsed_s in the step log

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

TrainerLoop::TrainerLoop(hub::TrainerPort& port, pulse::BlobStore& store,
                         const ModelWeights& initial, const train::TrainOptions& train_options,
                         TrainerLoopOptions options)
    : port_(port), store_(store), options_(std::move(options)) {
  STOA_CHECK(options_.checkpoint_every >= 1, ErrorKind::kInvalidArgument,
             "trainer loop: checkpoint_every must be >= 1, got ", options_.checkpoint_every);
  STOA_CHECK(options_.groups_per_step >= 1 && options_.min_groups >= 1 &&
                 options_.min_groups <= options_.groups_per_step,
             ErrorKind::kInvalidArgument,
             "trainer loop: need 1 <= min_groups <= groups_per_step, got ", options_.min_groups,
             " and ", options_.groups_per_step);
  if (auto ckpt = find_checkpoint(options_.checkpoint_dir)) {
    // A LoRA checkpoint holds the adapters only: they resume on the run's base model, which
    // the checkpoint's hash of it must match (train/trainer.h).
    trainer_ = std::make_unique<train::Trainer>(
        train_options.lora.enabled()
            ? train::Trainer::resume(*ckpt, WeightsTensorSource(initial), train_options,
                                     options_.ranks)
            : train::Trainer::resume(*ckpt, train_options, options_.ranks));
    resumed_ = true;
    const train::LoraOptions& held = trainer_->options().lora;
    const train::LoraOptions& asked = train_options.lora;
    if (asked.enabled() &&
        (held.rank != asked.rank || held.alpha != asked.alpha || held.dropout != asked.dropout ||
         held.targets != asked.targets || held.base_dtype != asked.base_dtype)) {
      // The adapters' shapes and the optimiser's moments are the checkpoint's: they cannot take
      // other settings mid-run, but the operator who edited [trainer.lora] must hear it.
      log_warn("trainer", "checkpoint ", *ckpt, " holds LoRA adapters of rank ", held.rank,
               ", alpha ", held.alpha, ", dropout ", held.dropout, ", ", held.targets.size(),
               " target(s), base ", dtype_name(held.base_dtype), "; [trainer.lora] asks for rank ",
               asked.rank, ", alpha ", asked.alpha, ", dropout ", asked.dropout, ", ",
               asked.targets.size(), " target(s), base ", dtype_name(asked.base_dtype),
               ": the run goes on with the checkpoint's (start a new run directory for others)");
    }
    log_info("trainer", "resumed from checkpoint ", *ckpt, " (trainer step ",
             trainer_->step_count(), ", ledger step ", port_.last_step(),
             trainer_->options().lora.enabled()
                 ? cat(", LoRA adapters of rank ", trainer_->options().lora.rank)
                 : std::string(),
             ")");
  } else {
    trainer_ = std::make_unique<train::Trainer>(initial, train_options, options_.ranks);
  }
  last_step_ = port_.last_step();
  signal_ = hub::LearningSignalWatch(options_.no_signal_warn_steps);
  config_hash_ = pulse::config_hash(trainer_->config());
  publisher_ = std::make_unique<pulse::Publisher>(store_, options_.publisher);
  if (!options_.log_path.empty()) {
    try {
      log_ = JsonlWriter(options_.log_path, JsonlWriter::Mode::kAppend);
    } catch (const Error& e) {
      fail(ErrorKind::kIo, "trainer loop: cannot open step log ", options_.log_path, ": ",
           e.what());
    }
  }
}

TrainerLoop::~TrainerLoop() = default;

uint64_t TrainerLoop::publish() {
  // Above every version either record knows: the ledger's, and the catalog's (a kill between
  // the publisher saving its catalog and the ledger recording the version leaves the catalog one
  // ahead; the publisher refuses a version it already published).
  std::optional<uint64_t> latest = port_.latest_version();
  if (const auto published = publisher_->catalog().latest_version())
    latest = std::max(latest.value_or(0), *published);
  const uint64_t next = latest ? *latest + 1 : 0;
  // The masters go one tensor at a time into the publisher's int8 view: no f32 copy of the model.
  const pulse::Published published = publisher_->publish(
      next, config_hash_,
      [this](const pulse::MasterSink& take) { trainer_->for_each_weight(take); });
  port_.publish_version(published, publisher_->current()->state_hash());
  if (published.rebuilt_from)
    log_info("trainer", "version ", next, " continues the published int8 view of version ",
             *published.rebuilt_from, " (a patch, ", published.patch ? published.patch->bytes : 0,
             " bytes)");
  last_patch_bytes_ = published.patch ? published.patch->bytes : 0;
  last_anchor_bytes_ = published.anchor ? published.anchor->bytes : 0;
  version_ = next;
  return next;
}

void TrainerLoop::start() {
  if (started_) return;
  publish();
  started_ = true;
  progress_.emplace(options_.max_steps, last_step_, Clock::now());
  last_step_end_ = Clock::now();
  log_info("trainer", "published version ", version_, resumed_ ? " (resumed)" : "");
}

size_t TrainerLoop::counted_groups() const {
  if (!options_.skip_uniform_groups) return carry_.size();
  return static_cast<size_t>(std::count_if(carry_.begin(), carry_.end(), has_reward_spread));
}

std::optional<LoopStep> TrainerLoop::step_once() {
  start();
  // Gather: keep taking whatever is complete until groups_per_step count, or until the timeout
  // has passed with at least min_groups counted.
  const auto gather_start = Clock::now();
  const size_t max_held = options_.skip_uniform_groups ? kMaxGatherFactor * options_.groups_per_step
                                                       : options_.groups_per_step;
  while (counted_groups() < options_.groups_per_step && carry_.size() < max_held) {
    auto got = port_.take_groups(options_.groups_per_step - counted_groups(), options_.poll);
    for (auto& g : got) carry_.push_back(std::move(g));
    const bool timed_out = Clock::now() - gather_start >= options_.gather_timeout;
    if (timed_out && counted_groups() >= options_.min_groups) break;
    if (timed_out && got.empty()) {
      // Nothing arriving: step on what is held (uniform groups too), or let the caller check stop.
      if (carry_.size() >= options_.min_groups) break;
      return std::nullopt;
    }
  }

  StalenessSplit split = apply_staleness(std::move(carry_), version_, options_.staleness);
  carry_.clear();
  if (!split.dropped.empty()) {
    port_.mark_dropped(split.dropped, "stale");
    groups_dropped_ += static_cast<int64_t>(split.dropped.size());
    log_info("trainer", "dropped ", split.dropped.size(), " stale group(s) at version ", version_);
  }
  drop_invalid(&split.kept);
  if (split.kept.empty()) return std::nullopt;

  // What runs through the model: the groups with signal, or (none of them, or the option off)
  // everything kept. Converted straight from the kept groups: no intermediate copy.
  std::vector<train::RolloutGroup> batch;
  for (const auto& g : split.kept)
    if (!options_.skip_uniform_groups || has_reward_spread(g)) batch.push_back(to_rollout_group(g));
  if (batch.empty()) batch = to_rollout_groups(split.kept);

  const auto compute_start = Clock::now();
  const double wall = seconds_since(last_step_end_);
  LoopStep s;
  s.step = last_step_ + 1;
  s.uniform_groups = split.kept.size() - batch.size();
  try {
    s.metrics = trainer_->train_step(batch);
  } catch (const Error& e) {
    // The trainer validates before anything runs and rejects a non-finite step before the
    // optimiser does: nothing was applied. Anything else (a lost rank, a full disk) ends the run.
    if (e.kind() != ErrorKind::kInvalidArgument) throw;
    std::vector<std::string> refused;
    for (const auto& g : batch) refused.push_back(g.id);
    drop_refused(refused, "trainer_refused", e.what());
    // Uniform groups that were to close with the step wait for the next one.
    for (auto& g : split.kept)
      if (std::find(refused.begin(), refused.end(), g.group_id) == refused.end())
        carry_.push_back(std::move(g));
    return std::nullopt;
  }
  for (const auto& g : split.kept) s.trained.push_back(g.group_id);
  s.dropped = split.dropped;
  s.staleness_histogram = split.histogram;

  hub::StepReport& r = s.report;
  r.step = s.step;
  r.step_seconds = s.metrics.seconds;
  r.masked_fraction = s.metrics.masked_fraction;
  r.tv = s.metrics.tv_mean;
  r.kl = s.metrics.kl_mean;
  r.reward_mean = mean_reward(split.kept);
  r.loss = s.metrics.loss;
  r.groups = static_cast<int64_t>(split.kept.size());
  r.groups_uniform =
      std::count_if(split.kept.begin(), split.kept.end(),
                    [](const hub::AcceptedGroup& g) { return !has_reward_spread(g); });
  r.tokens = s.metrics.tokens;
  // Of the wall time since the previous step ended (gathering + this step), the share spent
  // computing: what "the trainer never waits" is measured by.
  const double busy = seconds_since(compute_start);
  r.busy_fraction = wall + busy > 0 ? busy / (wall + busy) : 1.0;
  r.extra["lr"] = s.metrics.lr;
  r.extra["grad_norm"] = s.metrics.grad_norm;
  r.extra["entropy"] = s.metrics.entropy;
  r.extra["groups_dropped_stale"] = static_cast<double>(split.dropped.size());
  r.extra.insert(held_out_.begin(), held_out_.end());
  // Durable before anything else depends on the step: from here on these groups are never
  // handed out again, whatever happens to this process.
  port_.mark_trained(s.trained, r);
  last_step_ = s.step;
  watch_signal(r);

  s.version = publish();
  s.patch_bytes = last_patch_bytes_;
  s.anchor_bytes = last_anchor_bytes_;
  if (!options_.checkpoint_dir.empty() && s.step % options_.checkpoint_every == 0) {
    trainer_->save_checkpoint(options_.checkpoint_dir);
  }
  last_step_end_ = Clock::now();
  log_step(s);
  if (auto line = progress_->line(s.step, r.reward_mean, r.step_seconds, last_step_end_))
    log_info("trainer", *line);
  evaluate_held_out(s.step);
  return s;
}

void TrainerLoop::evaluate_held_out(int64_t step) {
  const HeldOutEval& e = options_.eval;
  if (e.every_steps <= 0 || !e.evaluate || step % e.every_steps != 0) return;
  const pulse::Int8State* view = publisher_->current();
  if (!view) return;  // the last publish failed: nothing that workers hold to evaluate
  try {
    const HeldOutResult result = e.evaluate(step, version_, *view);
    held_out_ = held_out_report(result, step, version_);
    log_info("trainer", held_out_line(result, step, version_));
  } catch (const Error& err) {
    log_warn("trainer", "held-out eval at step ", step, " (version ", version_,
             ") failed; training goes on: ", err.what());
  }
  // The evaluation's time is not the next step's gathering.
  last_step_end_ = Clock::now();
}

void TrainerLoop::drop_invalid(std::vector<hub::AcceptedGroup>* groups) {
  const env::RolloutLimits limits{trainer_->config().vocab_size, trainer_->max_tokens(),
                                  options_.topk};
  std::vector<hub::AcceptedGroup> valid;
  for (auto& g : *groups) {
    std::optional<std::string> why;
    for (const auto& r : g.rollouts) {
      env::RolloutView view = env::wire_rollout_view(r);
      view.reward = r.reward;
      if (auto refused = env::check_rollout(view, limits)) {
        why = cat("rollout ", r.id, ": ", refused->detail, " [", refused->reason, "]");
        break;
      }
    }
    if (why) {
      drop_refused({g.group_id}, "invalid_rollout", *why);
    } else {
      valid.push_back(std::move(g));
    }
  }
  *groups = std::move(valid);
}

void TrainerLoop::drop_refused(std::vector<std::string> group_ids, const std::string& reason,
                               const std::string& why) {
  port_.mark_dropped(group_ids, reason);
  groups_refused_ += static_cast<int64_t>(group_ids.size());
  log_warn("trainer", "dropped ", group_ids.size(), " group(s) the trainer cannot train on (",
           reason, ", never handed out again; ", group_ids.front(),
           group_ids.size() > 1 ? ", ..." : "", "): ", why);
}

void TrainerLoop::watch_signal(const hub::StepReport& report) {
  const bool was_warning = signal_.warning();
  if (signal_.add(report)) {
    log_warn("trainer", signal_.warning_text());
  } else if (was_warning && !signal_.warning()) {
    log_info("trainer", "learning signal back at step ", report.step, " (",
             report.groups - report.groups_uniform, " of ", report.groups,
             " groups with a reward spread)");
  }
}

void TrainerLoop::run(const std::atomic<bool>& stop) {
  start();
  // The baseline: a fresh run's starting weights, before the first step changes them.
  if (last_step_ == 0) evaluate_held_out(0);
  while (!stop.load()) {
    if (options_.max_steps > 0 && last_step_ >= options_.max_steps) break;
    step_once();
  }
}

void TrainerLoop::log_step(const LoopStep& s) {
  if (!log_.is_open()) return;
  const auto& m = s.metrics;
  StepRecord r;
  r.step = s.step;
  r.version = static_cast<int64_t>(s.version);
  r.trainer_step = m.step;
  r.groups = static_cast<int64_t>(s.trained.size());
  r.groups_dropped_stale = static_cast<int64_t>(s.dropped.size());
  r.groups_uniform = static_cast<int64_t>(s.uniform_groups);
  for (const auto& [behind, groups] : s.staleness_histogram)
    r.staleness_histogram[static_cast<int64_t>(behind)] = groups;
  r.reward_mean = s.report.reward_mean;
  r.loss = m.loss;
  r.lr = m.lr;
  r.sequences = m.sequences;
  r.tokens = m.tokens;
  r.tokens_total = m.tokens_total;
  r.masked_fraction = m.masked_fraction;
  r.masked_fraction_pos = m.masked_fraction_pos;
  r.masked_fraction_neg = m.masked_fraction_neg;
  r.tv_mean = m.tv_mean;
  r.tv_max = m.tv_max;
  r.kl_mean = m.kl_mean;
  r.kl_max = m.kl_max;
  r.entropy = m.entropy;
  r.grad_norm = m.grad_norm;
  r.step_seconds = m.seconds;
  r.busy_fraction = s.report.busy_fraction;
  r.patch_bytes = static_cast<int64_t>(s.patch_bytes);
  r.anchor_bytes = static_cast<int64_t>(s.anchor_bytes);
  r.unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  r.elapsed_s = seconds_since(kEpoch);
  log_.write(r);
  log_.flush();
}

}  // namespace stoa::trainer
