// Exact checkpoints: model/ (HF dir, f32 safetensors), optimizer.pt (AdamW moments and step
// counts, libtorch archive), trainer.json (step, RNG state, format). Resuming from one continues
// bit for bit: f32 weights and moments round-trip exactly and the step/RNG are restored.
//
// Format 2 stores the data-order Rng's four state words (hex). Format 1 stored a standard-library
// Mersenne Twister state, which this build cannot continue: such a checkpoint still resumes
// (weights, moments and step are exact) with the data-order generator restarted from the seed,
// and says so — the RL trainer never draws from it, so only an SFT epoch order differs from the
// original run's.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "model/safetensors.h"
#include "model/tensor_source.h"
#include "train/trainer_impl.h"

namespace stoa::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFormat = "stoa-trainer-checkpoint";
constexpr int kVersion = 2;
constexpr int kVersionMersenne = 1;  // readable: see the top of the file

nlohmann::json rng_state_json(const Rng& rng) {
  nlohmann::json words = nlohmann::json::array();
  for (uint64_t word : rng.state()) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016" PRIx64, word);
    words.push_back(hex);
  }
  return words;
}

Rng rng_from_json(const nlohmann::json& words) {
  STOA_CHECK(words.is_array() && words.size() == 4, ErrorKind::kBadFormat,
             "rng is not four state words");
  Rng::State state;
  for (size_t i = 0; i < 4; ++i) {
    const std::string hex = words[i].get<std::string>();
    size_t used = 0;
    state[i] = std::stoull(hex, &used, 16);
    STOA_CHECK(used == hex.size() && !hex.empty(), ErrorKind::kBadFormat, "rng word '", hex,
               "' is not hexadecimal");
  }
  STOA_CHECK(state != Rng::State{}, ErrorKind::kBadFormat, "rng state is all zero");
  return Rng::from_state(state);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  STOA_CHECK(in, ErrorKind::kNotFound, "checkpoint file ", path.string(), " cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The policy's own parameters as a source for the streamed model writer: one tensor's host copy
// at a time, never a second copy of the model.
class ParameterSource : public TensorSource {
 public:
  explicit ParameterSource(const PolicyModel& model)
      : TensorSource(model.config(), "the trainer's parameters"), model_(model) {}
  Tensor f32(const TensorSpec& spec) const override {
    return from_torch(model_.merged(spec.name));  // LoRA: W + scale·B·A; else the master
  }

 private:
  const PolicyModel& model_;
};

constexpr const char* kAdaptersFile = "adapters.safetensors";

// LoRA: the adapters (f32, PEFT's names) as one safetensors file.
void write_adapters(const PolicyModel& model, const std::string& path) {
  std::vector<torch::Tensor> hosts;
  std::vector<NamedView> views;
  for (size_t i = 0; i < model.adapters().size(); ++i) {
    hosts.push_back(model.adapters()[i].detach().to(torch::kCPU, torch::kFloat32).contiguous());
    const torch::Tensor& h = hosts.back();
    views.emplace_back(
        model.adapter_names()[i],
        TensorView(h.data_ptr(), DType::kF32, Shape(h.sizes().begin(), h.sizes().end())));
  }
  write_safetensors(path, views);
}

void read_adapters(const PolicyModel& model, const std::string& path) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  torch::NoGradGuard no_grad;
  STOA_CHECK(file.entries().size() == model.adapters().size(), ErrorKind::kBadFormat, path,
             " holds ", file.entries().size(), " tensors; the LoRA targets make ",
             model.adapters().size());
  for (size_t i = 0; i < model.adapters().size(); ++i) {
    const std::string& name = model.adapter_names()[i];
    const Tensor loaded = file.load(name);
    torch::Tensor adapter = model.adapters()[i];
    STOA_CHECK(loaded.dtype() == DType::kF32 &&
                   Shape(adapter.sizes().begin(), adapter.sizes().end()) == loaded.shape(),
               ErrorKind::kBadFormat, path, ": adapter ", name, " is ", dtype_name(loaded.dtype()),
               " ", shape_string(loaded.shape()), "; expected f32 ", adapter.sizes());
    adapter.copy_(to_torch(loaded).to(adapter.device()));
  }
}

// The AdamW moments and step of optimizer.pt, mapped onto this trainer's device (a checkpoint
// written on a GPU resumes on a CPU too). The archive carries the old hyper-parameters; the
// caller's options win (lr is set per step).
void load_optimizer(torch::optim::AdamW& optimizer, const fs::path& path,
                    const torch::Device& device, const OptimizerOptions& options) {
  try {
    torch::load(optimizer, path.string(), device);
  } catch (const std::exception& e) {
    fail(ErrorKind::kBadFormat, "checkpoint optimiser state ", path.string(),
         " cannot be loaded: ", e.what());
  }
  for (auto& group : optimizer.param_groups()) {
    auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
    o.betas(std::make_tuple(options.beta1, options.beta2))
        .eps(options.eps)
        .weight_decay(options.weight_decay);
  }
}

}  // namespace

void Trainer::save_model(const std::string& dir, DType dtype) const {
  if (impl_->fsdp()) {
    impl_->save_model_sharded(dir, dtype);  // streamed: one gathered tensor at a time
    return;
  }
  save_model_dir(ParameterSource(*impl_->model), dir, dtype);
}

std::unique_ptr<TensorSource> Trainer::model_source() const {
  STOA_CHECK(!impl_->fsdp(), ErrorKind::kUnsupported,
             "a fully sharded trainer's model is read by save_model (gathered per tensor)");
  return std::make_unique<ParameterSource>(*impl_->model);
}

void Trainer::save_checkpoint(const std::string& dir) const {
  Impl& im = *impl_;
  const fs::path final_dir(dir);
  const fs::path tmp = final_dir.string() + ".tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "cannot create checkpoint directory ", tmp.string(), ": ",
             ec.message());
  nlohmann::json meta = {{"format", kFormat},
                         {"version", kVersion},
                         {"step", im.step},
                         {"rng", rng_state_json(im.rng)},
                         {"loss", loss_kind_name(im.options.loss.kind)},
                         {"lr", im.options.optimizer.lr}};
  if (im.fsdp()) {
    // Every rank writes its own shard (fsdp_trainer.cpp); nothing is gathered.
    if (im.distributed()) im.send(kCommandSaveShards, (tmp / "shards").string());
    im.save_shards((tmp / "shards").string());
    write_model_dir_config(im.config(), tmp.string(), "float32");
    // The f32 model too, streamed through rank 0 one gathered tensor at a time, for what reads a
    // run's checkpoint as a model (evaluation, `stoa model export-hf --from`, the demo); resuming
    // reads the shards.
    im.save_model_sharded((tmp / "model").string(), DType::kF32);
    meta["sharded"] = {{"kind", "fsdp"}, {"world", im.sharded->layout().world}};
  } else if (im.model->lora()) {
    // LoRA: the adapters, their AdamW state and the base's hash; never the base itself.
    const LoraOptions& l = im.model->lora_options();
    write_adapters(*im.model, (tmp / kAdaptersFile).string());
    write_model_dir_config(im.config(), tmp.string(), "float32");  // the base's shape
    // Data parallel: the owners' AdamW shards of the adapters gathered, as below.
    std::unique_ptr<torch::optim::AdamW> gathered;
    if (im.distributed()) {
      im.send(kCommandGatherOptimizer, "");
      gathered = im.gather_optimizer();
    }
    try {
      torch::save(gathered ? *gathered : *im.optimizer, (tmp / "optimizer.pt").string());
    } catch (const std::exception& e) {
      fail(ErrorKind::kIo, "cannot write ", (tmp / "optimizer.pt").string(), ": ", e.what());
    }
    meta["lora"] = {{"rank", l.rank},
                    {"alpha", l.alpha},
                    {"dropout", l.dropout},
                    {"target_modules", l.targets},
                    {"base_dtype", dtype_name(l.base_dtype)},
                    {"base_hash", im.model->parameters_hash().hex()}};
  } else {
    // Data parallel: the owners' AdamW shards gathered into one process's state, so the
    // checkpoint is the same format whatever the number of ranks that wrote or will resume it.
    std::unique_ptr<torch::optim::AdamW> gathered;
    if (im.distributed()) {
      im.send(kCommandGatherOptimizer, "");
      gathered = im.gather_optimizer();
    }
    const torch::optim::AdamW& optimizer = gathered ? *gathered : *im.optimizer;
    save_model_dir(ParameterSource(*im.model), (tmp / "model").string(), DType::kF32);
    try {
      torch::save(optimizer, (tmp / "optimizer.pt").string());
    } catch (const std::exception& e) {
      fail(ErrorKind::kIo, "cannot write ", (tmp / "optimizer.pt").string(), ": ", e.what());
    }
  }
  {
    std::ofstream out(tmp / "trainer.json", std::ios::binary);
    out << meta.dump(2) << "\n";
    STOA_CHECK(out.good(), ErrorKind::kIo, "cannot write ", (tmp / "trainer.json").string());
  }
  // Replace by renames only: removing the old directory in place is not atomic, and a kill part
  // way through it left a trainer.json beside a half-deleted model/. At every instant one of
  // <dir>, <dir>.tmp or <dir>.old is a complete checkpoint (find_checkpoint's order).
  const fs::path old = final_dir.string() + ".old";
  fs::remove_all(old, ec);
  if (fs::exists(final_dir)) {
    fs::rename(final_dir, old, ec);
    STOA_CHECK(!ec, ErrorKind::kIo, "cannot move checkpoint ", dir, " aside to ", old.string(),
               ": ", ec.message());
  }
  fs::rename(tmp, final_dir, ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "cannot move checkpoint ", tmp.string(), " to ", dir, ": ",
             ec.message());
  fs::remove_all(old, ec);
}

Trainer Trainer::resume(const std::string& dir, const TrainOptions& options,
                        std::shared_ptr<Communicator> ranks) {
  const fs::path root(dir);
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(read_text(root / "trainer.json"));
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadFormat, "checkpoint ", (root / "trainer.json").string(),
         " is not valid JSON: ", e.what());
  }
  STOA_CHECK(meta.is_object() && meta.value("format", "") == kFormat, ErrorKind::kBadFormat,
             "checkpoint ", dir, " is not a Stoa trainer checkpoint (trainer.json format)");
  const int version = meta.value("version", 0);
  STOA_CHECK(version == kVersion || version == kVersionMersenne, ErrorKind::kUnsupported,
             "checkpoint ", dir, " has format version ", version, "; this build reads ",
             kVersionMersenne, " and ", kVersion);
  STOA_CHECK(!meta.contains("lora"), ErrorKind::kInvalidArgument, "checkpoint ", dir,
             " holds LoRA adapters only: resume it on the base model it was trained from");
  const bool sharded_checkpoint = meta.contains("sharded");
  STOA_CHECK(sharded_checkpoint == (options.sharding == Sharding::kFsdp),
             ErrorKind::kInvalidArgument, "checkpoint ", dir, " was written by a ",
             sharded_checkpoint ? "fully sharded (fsdp)" : "zero1 or one-process",
             " trainer; resume it with sharding = ", sharded_checkpoint ? "fsdp" : "zero1");
  if (sharded_checkpoint) {
    const ModelConfig config =
        parse_model_config(read_text(root / "config.json"), (root / "config.json").string());
    auto impl = std::make_unique<Impl>(config, options_for_rank(options, ranks.get()));
    try {
      impl->step = meta.at("step").get<int64_t>();
      STOA_CHECK(impl->step >= 0, ErrorKind::kBadFormat, "negative step");
      impl->rng = rng_from_json(meta.at("rng"));
    } catch (const std::exception& e) {
      fail(ErrorKind::kBadFormat, "checkpoint ", (root / "trainer.json").string(),
           " has a bad step or RNG state: ", e.what());
    }
    impl->start_sharded(std::move(ranks), nullptr, dir);  // every rank reads its own ranges
    return Trainer(std::move(impl));
  }
  auto impl = std::make_unique<Impl>(load_model_dir((root / "model").string()),
                                     options_for_rank(options, ranks.get()));
  load_optimizer(*impl->optimizer, root / "optimizer.pt", impl->device, options.optimizer);
  try {
    impl->step = meta.at("step").get<int64_t>();
    STOA_CHECK(impl->step >= 0, ErrorKind::kBadFormat, "negative step");
    if (version == kVersion) impl->rng = rng_from_json(meta.at("rng"));
  } catch (const std::exception& e) {
    fail(ErrorKind::kBadFormat, "checkpoint ", (root / "trainer.json").string(),
         " has a bad step or RNG state: ", e.what());
  }
  if (version == kVersionMersenne) {
    log_warn("train", "checkpoint ", dir, " is format ", kVersionMersenne,
             " (a Mersenne Twister data-order state): resumed with the data-order generator "
             "restarted from seed ",
             options.seed, ", so an SFT run shuffles differently from here on than it would have");
  }
  impl->join(std::move(ranks));  // data parallel: the other ranks get weights, step, moments
  return Trainer(std::move(impl));
}

Trainer Trainer::resume(const std::string& dir, const TensorSource& base, TrainOptions options,
                        std::shared_ptr<Communicator> ranks) {
  const fs::path root(dir);
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(read_text(root / "trainer.json"));
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadFormat, "checkpoint ", (root / "trainer.json").string(),
         " is not valid JSON: ", e.what());
  }
  STOA_CHECK(meta.is_object() && meta.value("format", "") == kFormat &&
                 meta.value("version", 0) == kVersion && meta.contains("lora"),
             ErrorKind::kBadFormat, "checkpoint ", dir, " is not a Stoa LoRA checkpoint");
  std::string base_hash;
  int64_t step = 0;
  Rng rng(options.seed, 0);
  try {
    const nlohmann::json& l = meta.at("lora");
    options.lora.rank = l.at("rank").get<int64_t>();
    options.lora.alpha = l.at("alpha").get<double>();
    options.lora.dropout = l.at("dropout").get<double>();
    options.lora.targets = l.at("target_modules").get<std::vector<std::string>>();
    options.lora.init_adapter.clear();  // the checkpoint's adapters win
    STOA_CHECK(parse_dtype(l.at("base_dtype").get<std::string>(), &options.lora.base_dtype),
               ErrorKind::kBadFormat, "unknown base dtype");
    base_hash = l.at("base_hash").get<std::string>();
    step = meta.at("step").get<int64_t>();
    STOA_CHECK(step >= 0, ErrorKind::kBadFormat, "negative step");
    rng = rng_from_json(meta.at("rng"));
  } catch (const std::exception& e) {
    fail(ErrorKind::kBadFormat, "checkpoint ", (root / "trainer.json").string(),
         " has a bad LoRA section, step or RNG state: ", e.what());
  }
  STOA_CHECK(options.sharding == Sharding::kZero1, ErrorKind::kUnsupported,
             "LoRA does not train with sharding = fsdp yet; use sharding = zero1 (one process or "
             "data-parallel ranks)");
  auto impl = std::make_unique<Impl>(base, options_for_rank(options, ranks.get()));
  const std::string actual = impl->model->parameters_hash().hex();
  STOA_CHECK(actual == base_hash, ErrorKind::kIntegrity, "checkpoint ", dir,
             " holds adapters of the base with hash ", base_hash, "; ", base.description(),
             " hashes to ", actual, " (another model, or another base dtype)");
  read_adapters(*impl->model, (root / kAdaptersFile).string());
  load_optimizer(*impl->optimizer, root / "optimizer.pt", impl->device, options.optimizer);
  impl->step = step;
  impl->rng = rng;
  impl->join(std::move(ranks));  // data parallel: the other ranks get base, adapters, moments
  return Trainer(std::move(impl));
}

}  // namespace stoa::train
