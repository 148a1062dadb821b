// `stoa train --sft`: supervised warm start on JSONL transcripts (format: src/train/sft_data.h).
// Reads a Hugging Face model directory, trains with AdamW on the masked tokens, writes the
// trained model directory (plus the tokenizer files) and, optionally, an exact checkpoint after
// every epoch that --resume continues from.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/hub_trainer_run.h"
#include "core/error.h"
#include "core/log.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "train/sft_data.h"
#include "train/trainer.h"

namespace stoa::cli {
namespace {

namespace fs = std::filesystem;

struct Options {
  bool sft = false;
  std::string config;  // RL: the hub + trainer of a run config
  std::string data, model, out, checkpoint, resume;
  // Every `snapshot_every` steps a complete model directory <out>-snapshots/step-<N> (announced
  // on stdout), so an orchestrator can evaluate the SFT while it runs and stop it early.
  int64_t snapshot_every = 0;
  int epochs = 1;
  int64_t batch_tokens = 4096;
  int64_t micro_batch_tokens = 4096;
  double lr = 1e-5, weight_decay = 0.0, max_grad_norm = 1.0;
  int64_t warmup = 0;
  std::string schedule = "constant";
  std::string device = "cpu", dtype = "f32";
  int threads = 0;
  uint64_t seed = 0;
  bool json = false;
};

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

int run(const Options& o) {
  if (!o.config.empty()) {
    STOA_CHECK(!o.sft, ErrorKind::kInvalidArgument,
               "stoa train: --config (RL: hub + trainer) and --sft are different jobs");
    return run_hub_and_trainer(o.config, -1);
  }
  STOA_CHECK(o.sft, ErrorKind::kInvalidArgument,
             "stoa train: give --config run.toml (RL: hub + asynchronous DPPO trainer) or --sft");
  STOA_CHECK(!o.data.empty() && !o.model.empty() && !o.out.empty(), ErrorKind::kInvalidArgument,
             "stoa train --sft needs --data, --model and --out");
  ModelWeights weights = load_model_dir(o.model);
  train::SftDataOptions data;
  data.vocab_size = weights.config.vocab_size;
  data.eos_token_id = static_cast<int32_t>(weights.config.eos_token_id);
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
  t.optimizer.lr = o.lr;
  t.optimizer.weight_decay = o.weight_decay;
  t.optimizer.max_grad_norm = o.max_grad_norm;
  t.schedule.kind = train::parse_schedule_kind(o.schedule);
  t.schedule.warmup_steps = o.warmup;
  t.micro_batch_tokens = o.micro_batch_tokens;
  t.seed = o.seed;
  // Steps per epoch do not depend on the order (batches are cut from a permutation of the same
  // examples by a token budget, so their count can differ slightly; the schedule uses the first
  // epoch's count).
  const int64_t steps_per_epoch =
      static_cast<int64_t>(train::batch_by_tokens(examples, o.batch_tokens).size());
  t.schedule.total_steps = steps_per_epoch * o.epochs;
  train::Trainer trainer =
      o.resume.empty() ? train::Trainer(weights, t) : train::Trainer::resume(o.resume, t);
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

const CommandRegistration registration(
    "train",
    "Train the policy: RL from a run config (--config run.toml: the hub + asynchronous DPPO "
    "trainer, same as `stoa run`) or a supervised warm start (--sft)",
    [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("--config", o->config, "run.toml: RL with the hub (see `stoa run`)");
      app.add_flag("--sft", o->sft, "Supervised fine-tuning on JSONL transcripts");
      app.add_option("--data", o->data,
                     "JSONL transcripts (tokens/mask, prompt/completion or "
                     "messages; see src/train/sft_data.h)");
      app.add_option("--model", o->model, "Hugging Face model directory to start from");
      app.add_option("--out", o->out, "Where to write the trained model directory");
      app.add_option("--epochs", o->epochs, "Passes over the data")->capture_default_str();
      app.add_option("--lr", o->lr, "Peak learning rate")->capture_default_str();
      app.add_option("--batch-tokens", o->batch_tokens, "Tokens per optimiser step")
          ->capture_default_str();
      app.add_option("--micro-batch-tokens", o->micro_batch_tokens,
                     "Padded tokens per forward/backward chunk")
          ->capture_default_str();
      app.add_option("--warmup", o->warmup, "Linear warm-up steps")->capture_default_str();
      app.add_option("--schedule", o->schedule, "constant or cosine")->capture_default_str();
      app.add_option("--weight-decay", o->weight_decay, "AdamW decoupled weight decay")
          ->capture_default_str();
      app.add_option("--max-grad-norm", o->max_grad_norm, "Gradient-norm clip (<= 0: off)")
          ->capture_default_str();
      app.add_option("--device", o->device, "cpu, cuda or cuda:N")->capture_default_str();
      app.add_option("--dtype", o->dtype, "Matmul dtype: f32 or bf16 (master weights stay f32)")
          ->capture_default_str();
      app.add_option("--threads", o->threads, "libtorch intra-op threads (0: default)");
      app.add_option("--seed", o->seed, "Data-order seed")->capture_default_str();
      app.add_option("--checkpoint", o->checkpoint, "Write an exact checkpoint here every epoch");
      app.add_option("--resume", o->resume, "Continue from a checkpoint directory");
      app.add_option("--snapshot-every", o->snapshot_every,
                     "Also write the model to <out>-snapshots/step-<N> every N steps");
      app.add_flag("--json", o->json, "One JSON line of metrics per step on stdout");
      return [o] { return run(*o); };
    });

}  // namespace
}  // namespace stoa::cli
