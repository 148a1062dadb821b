#include "app/sft/sft_job.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "model/gguf_source.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "train/sft_data.h"
#include "train/trainer.h"

namespace stoa::app {
namespace {

namespace fs = std::filesystem;

// The trained weights plus the start model's side files (tokenizer, ...): a complete model
// directory.
void write_model_dir(train::Trainer& trainer, const std::string& start_model,
                     const std::string& out) {
  trainer.save_model(out, DType::kF32);
  for (const auto& entry : fs::directory_iterator(start_model)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name == "config.json" ||
        entry.path().extension() == ".safetensors") {
      continue;
    }
    fs::copy_file(entry.path(), fs::path(out) / name, fs::copy_options::overwrite_existing);
  }
}

}  // namespace

int run_sft_job(const SftJobOptions& o) {
  STOA_CHECK(!o.data.empty() && !o.model.empty() && !o.out.empty(), ErrorKind::kInvalidArgument,
             "stoa train --sft needs --data, --model and --out");
  const train::Sharding sharding = train::parse_sharding(o.sharding);
  // Streamed into the trainer one tensor at a time (FSDP: into the ranks' shards), so the start
  // model never exists twice.
  const std::unique_ptr<TensorSource> source = open_model_dir_source(o.model);
  const ModelConfig& config = source->config();
  train::SftDataOptions data;
  data.vocab_size = config.vocab_size;
  data.eos_token_id = static_cast<int32_t>(config.eos_token_id);
  std::unique_ptr<Tokenizer> tokenizer;
  if (fs::exists(fs::path(o.model) / "tokenizer.json")) {
    tokenizer = std::make_unique<Tokenizer>(
        Tokenizer::from_file((fs::path(o.model) / "tokenizer.json").string()));
    data.tokenizer = tokenizer.get();
  }
  std::vector<train::SftExample> examples = train::load_sft_jsonl(o.data, data);

  train::TrainOptions t;
  t.device = o.device;
  STOA_CHECK(parse_dtype(o.dtype, &t.compute_dtype), ErrorKind::kInvalidArgument, "unknown dtype '",
             o.dtype, "' (f32, bf16)");
  t.threads = o.threads;
  t.sharding = sharding;
  t.optimizer.lr = o.lr;
  t.optimizer.weight_decay = o.weight_decay;
  t.optimizer.max_grad_norm = o.max_grad_norm;
  t.schedule.kind = train::parse_schedule_kind(o.schedule);
  t.schedule.warmup_steps = o.warmup;
  t.micro_batch_tokens = o.micro_batch_tokens;
  t.seed = o.seed;
  t.lora = o.lora;
  STOA_CHECK(parse_dtype(o.lora_base_dtype, &t.lora.base_dtype), ErrorKind::kInvalidArgument,
             "unknown LoRA base dtype '", o.lora_base_dtype, "' (bf16, f32)");
  // Steps per epoch do not depend on the order (batches are cut from a permutation of the same
  // examples by a token budget, so their count can differ slightly; the schedule uses the first
  // epoch's count).
  const int64_t steps_per_epoch =
      static_cast<int64_t>(train::batch_by_tokens(examples, o.batch_tokens).size());
  t.schedule.total_steps = steps_per_epoch * o.epochs;
  train::Trainer trainer = o.resume.empty() ? train::Trainer(*source, t, o.ranks)
                           : o.lora.enabled()
                               ? train::Trainer::resume(o.resume, *source, t, o.ranks)
                               : train::Trainer::resume(o.resume, t, o.ranks);
  int start_epoch = 0;
  if (!o.resume.empty()) {
    start_epoch = static_cast<int>(trainer.step_count() / std::max<int64_t>(1, steps_per_epoch));
    log_info("train", "resumed from ", o.resume, " at step ", trainer.step_count(), " (epoch ",
             start_epoch, ")");
  }
  log_info("train", "SFT: ", examples.size(), " examples, ", steps_per_epoch, " steps per epoch, ",
           o.epochs, " epochs");
  for (int epoch = start_epoch; epoch < o.epochs; ++epoch) {
    // Fisher–Yates with the trainer's RNG, so a resumed run shuffles as the original would.
    for (size_t i = examples.size(); i > 1; --i) {
      std::swap(examples[i - 1], examples[trainer.next_random() % i]);
    }
    for (const auto& batch : train::batch_by_tokens(examples, o.batch_tokens)) {
      train::StepMetrics m = trainer.sft_step(batch);
      if (o.json) {
        nlohmann::json line = {{"epoch", epoch},
                               {"step", m.step},
                               {"lr", m.lr},
                               {"loss", m.loss},
                               {"tokens", m.tokens},
                               {"entropy", m.entropy},
                               {"grad_norm", m.grad_norm},
                               {"tokens_per_s", m.tokens_per_second}};
        std::printf("%s\n", line.dump().c_str());
        std::fflush(stdout);
      } else {
        log_info("train", "epoch ", epoch, " step ", m.step, " loss ", m.loss, " lr ", m.lr,
                 " grad_norm ", m.grad_norm, " ", static_cast<int64_t>(m.tokens_per_second),
                 " tokens/s");
      }
      if (o.snapshot_every > 0 && m.step % o.snapshot_every == 0) {
        const std::string dir = o.out + "-snapshots/step-" + std::to_string(m.step);
        write_model_dir(trainer, o.model, dir);
        if (o.json) {
          std::printf("%s\n", nlohmann::json{{"snapshot", dir}, {"step", m.step}}.dump().c_str());
          std::fflush(stdout);
        } else {
          log_info("train", "snapshot ", dir);
        }
      }
    }
    if (!o.checkpoint.empty()) trainer.save_checkpoint(o.checkpoint);
  }
  write_model_dir(trainer, o.model, o.out);
  log_info("train", "wrote ", o.out, " after ", trainer.step_count(), " steps");
  return 0;
}

}  // namespace stoa::app
