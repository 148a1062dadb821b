// Exact checkpoints: model/ (HF dir, f32 safetensors), optimizer.pt (AdamW moments and step
// counts, libtorch archive), trainer.json (step, RNG state, format). Resuming from one continues
// bit for bit: f32 weights and moments round-trip exactly and the step/RNG are restored.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/trainer_impl.h"

namespace stoa::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFormat = "stoa-trainer-checkpoint";
constexpr int kVersion = 1;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  STOA_CHECK(in, ErrorKind::kNotFound, "checkpoint file ", path.string(), " cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void Trainer::save_model(const std::string& dir, DType dtype) const {
  save_model_dir(weights(), dir, dtype);
}

void Trainer::save_checkpoint(const std::string& dir) const {
  const Impl& im = *impl_;
  const fs::path final_dir(dir);
  const fs::path tmp = final_dir.string() + ".tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "cannot create checkpoint directory ", tmp.string(), ": ",
             ec.message());
  save_model_dir(weights(), (tmp / "model").string(), DType::kF32);
  try {
    torch::save(*im.optimizer, (tmp / "optimizer.pt").string());
  } catch (const std::exception& e) {
    fail(ErrorKind::kIo, "cannot write ", (tmp / "optimizer.pt").string(), ": ", e.what());
  }
  std::ostringstream rng;
  rng << im.rng;
  nlohmann::json meta = {{"format", kFormat},
                         {"version", kVersion},
                         {"step", im.step},
                         {"rng", rng.str()},
                         {"loss", loss_kind_name(im.options.loss.kind)},
                         {"lr", im.options.optimizer.lr}};
  {
    std::ofstream out(tmp / "trainer.json", std::ios::binary);
    out << meta.dump(2) << "\n";
    STOA_CHECK(out.good(), ErrorKind::kIo, "cannot write ", (tmp / "trainer.json").string());
  }
  fs::remove_all(final_dir, ec);
  fs::rename(tmp, final_dir, ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "cannot move checkpoint ", tmp.string(), " to ", dir, ": ",
             ec.message());
}

Trainer Trainer::resume(const std::string& dir, const TrainOptions& options) {
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
  STOA_CHECK(meta.value("version", 0) == kVersion, ErrorKind::kUnsupported, "checkpoint ", dir,
             " has format version ", meta.value("version", 0), "; this build reads ", kVersion);
  auto impl = std::make_unique<Impl>(load_model_dir((root / "model").string()), options);
  try {
    // Mapped onto this trainer's device: a checkpoint written on a GPU resumes on a CPU too.
    torch::load(*impl->optimizer, (root / "optimizer.pt").string(), impl->device);
  } catch (const std::exception& e) {
    fail(ErrorKind::kBadFormat, "checkpoint optimiser state ", (root / "optimizer.pt").string(),
         " cannot be loaded: ", e.what());
  }
  // The archive carries the old hyper-parameters; the caller's options win (lr is set per step).
  for (auto& group : impl->optimizer->param_groups()) {
    auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
    o.betas(std::make_tuple(options.optimizer.beta1, options.optimizer.beta2))
        .eps(options.optimizer.eps)
        .weight_decay(options.optimizer.weight_decay);
  }
  try {
    impl->step = meta.at("step").get<int64_t>();
    std::istringstream rng(meta.at("rng").get<std::string>());
    rng >> impl->rng;
    STOA_CHECK(!rng.fail() && impl->step >= 0, ErrorKind::kBadFormat, "bad step or rng");
  } catch (const std::exception& e) {
    fail(ErrorKind::kBadFormat, "checkpoint ", (root / "trainer.json").string(),
         " has a bad step or RNG state: ", e.what());
  }
  return Trainer(std::move(impl));
}

}  // namespace stoa::train
