// `stoa model export-hf` of a LoRA checkpoint (app/export/lora_export.h). The checkpoint is the
// trainer's own after a real SFT step on the warm-start model (a trained LFM2 with its
// tokenizer): the merged model must be the trainer's merged view bit for bit (f32), the PEFT
// adapter its adapters bit for bit, and a trainer started from that adapter on the same base
// must compute the same logits. A checkpoint without its base, --adapter on a fully fine-tuned
// model and a base the adapters were not trained on are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "app/export/hf_export_from.h"
#include "core/error.h"
#include "model/gguf_source.h"
#include "model/peft_adapter.h"
#include "model/tensor_source.h"
#include "model/weights.h"
#include "support/source_dir.h"
#include "support/temp_dir.h"
#include "train/trainer.h"

namespace stoa {
namespace {

namespace fs = std::filesystem;

fs::path warm_start_dir() {
  return test::source_dir() / "assets" / "warm-start";
}

train::TrainOptions lora_options() {
  train::TrainOptions o;
  o.threads = 1;
  o.optimizer.lr = 1e-2;
  o.lora.rank = 4;
  o.lora.alpha = 8;
  return o;
}

class LoraExport : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy(warm_start_dir(), model);
    base = open_model_dir_source(model.string());
    trainer = std::make_unique<train::Trainer>(*base, lora_options());
    const std::vector<int32_t> tokens = {4086, 10, 20, 30, 40, 50, 4087};
    trainer->sft_step({{"a", tokens, std::vector<uint8_t>(tokens.size(), 1)}});
    trainer->save_checkpoint(checkpoint.string());
  }

  app::ExportHfRequest request(const fs::path& out, bool adapter) const {
    app::ExportHfRequest r;
    r.from = checkpoint.string();
    r.out = out.string();
    r.base = model.string();
    r.dtype = "f32";
    r.adapter = adapter;
    return r;
  }

  void expect_merged_is_the_trainers(const fs::path& dir) const {
    const ModelWeights merged = load_model_dir(dir.string());
    const ModelWeights expected = trainer->weights();
    ASSERT_EQ(merged.tensors.size(), expected.tensors.size());
    for (const auto& [name, tensor] : expected.tensors) {
      const Tensor& got = merged.at(name);
      ASSERT_EQ(got.shape(), tensor.shape()) << name;
      EXPECT_EQ(std::memcmp(got.data(), tensor.data(), tensor.nbytes()), 0) << name;
    }
    EXPECT_TRUE(fs::is_regular_file(dir / "tokenizer.json"));
  }

  ErrorKind refused(const app::ExportHfRequest& r, const std::string& words) const {
    try {
      app::export_hf_from(r);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      return e.kind();
    }
    ADD_FAILURE() << "not refused";
    return ErrorKind::kInternal;
  }

  testing::TempDir tmp{"export-lora"};
  fs::path model = tmp.file("model"), checkpoint = tmp.file("checkpoint");
  std::unique_ptr<TensorSource> base;
  std::unique_ptr<train::Trainer> trainer;
};

TEST_F(LoraExport, TheAdapterGoesOutInPeftLayoutBesideTheMergedModelAndStartsATrainer) {
  const fs::path out = tmp.file("exported");
  app::ExportHfRequest r = request(out, true);
  r.base_name = "LiquidAI/LFM2-350M";
  const nlohmann::json summary = app::export_hf_from(r);
  EXPECT_EQ(summary.at("from"), "checkpoint");
  EXPECT_EQ(summary.at("rank"), 4);
  expect_merged_is_the_trainers(out / "merged");

  std::ifstream config_file(out / "adapter" / kPeftConfigFile);
  const nlohmann::json config = nlohmann::json::parse(config_file);
  EXPECT_EQ(config.at("base_model_name_or_path"), "LiquidAI/LFM2-350M");
  EXPECT_EQ(config.at("peft_type"), "LORA");
  const PeftAdapter adapter = read_peft_adapter((out / "adapter").string());
  size_t seen = 0;
  trainer->for_each_adapter([&](const std::string& name, const Shape& shape, const float* v) {
    const Tensor& got = adapter.tensors.at(name);
    ASSERT_EQ(got.shape(), shape) << name;
    EXPECT_EQ(std::memcmp(got.data(), v, got.nbytes()), 0) << name;
    ++seen;
  });
  EXPECT_EQ(seen, adapter.tensors.size());
  EXPECT_EQ(summary.at("adapter_tensors"), seen);

  train::TrainOptions start = lora_options();
  start.seed = 5;
  start.lora.init_adapter = (out / "adapter").string();
  const train::Trainer restarted(*base, start);
  const std::vector<int32_t> tokens = {4086, 1, 2, 3, 5, 8};
  const Tensor a = restarted.logits(tokens), b = trainer->logits(tokens);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
}

TEST_F(LoraExport, WithoutAdapterTheMergedModelAlone) {
  const fs::path out = tmp.file("merged-only");
  app::export_hf_from(request(out, false));
  expect_merged_is_the_trainers(out);
  EXPECT_FALSE(fs::exists(out / "adapter"));
}

TEST_F(LoraExport, RefusesWhatCannotBeExported) {
  app::ExportHfRequest no_base = request(tmp.file("a"), true);
  no_base.base.clear();
  EXPECT_EQ(refused(no_base, "give --base DIR"), ErrorKind::kInvalidArgument);

  app::ExportHfRequest full = request(tmp.file("b"), true);
  full.from = model.string();
  EXPECT_EQ(refused(full, "--adapter wants a LoRA run or checkpoint"), ErrorKind::kInvalidArgument);

  // Another base of the same shape (and the same tokenizer): its hash is not the checkpoint's.
  const fs::path other = tmp.file("other-base");
  save_model_dir(RandomTensorSource(base->config(), 11), other.string(), DType::kF32);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(model / file, other / file);
  app::ExportHfRequest wrong = request(tmp.file("c"), true);
  wrong.base = other.string();
  EXPECT_EQ(refused(wrong, "holds adapters of the base with hash"), ErrorKind::kIntegrity);
  EXPECT_FALSE(fs::exists(tmp.file("c") + "/adapter"));

  const fs::path busy = tmp.file("busy");
  fs::create_directories(busy);
  std::ofstream(busy / "keep.txt") << "x";
  EXPECT_EQ(refused(request(busy, true), "exists and is not empty"), ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace stoa
