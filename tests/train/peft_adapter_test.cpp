// LoRA adapters in PEFT's layout (model/peft_adapter.h; check_peft_adapter in train/lora.h):
// what a trained trainer's adapters become on disk (PEFT's config keys and tensor names), read
// back bit for bit, and a trainer started
// from them computes what the trainer that wrote them computes. An adapter of another rank,
// alpha, target set or base, and a damaged or foreign-featured adapter directory, are refused
// saying what is wrong.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "core/error.h"
#include "model/peft_adapter.h"
#include "model/presets.h"
#include "model/safetensors.h"
#include "model/tensor_source.h"
#include "support/temp_dir.h"
#include "train/lora.h"
#include "train/trainer.h"

namespace stoa::train {
namespace {

namespace fs = std::filesystem;

TrainOptions options(int64_t rank, std::vector<std::string> targets = {"all-linear"}) {
  TrainOptions o;
  o.threads = 1;
  o.optimizer.lr = 1e-2;
  o.seed = 7;
  o.lora.rank = rank;
  o.lora.alpha = 8;
  o.lora.targets = std::move(targets);
  return o;
}

// A LoRA trainer after one SFT step (B no longer zero) and its adapters as a PEFT directory.
struct Trained {
  Trained(const std::string& preset, const TrainOptions& o, const std::string& dir)
      : base(preset_config(preset), 3), trainer(base, o) {
    std::vector<int32_t> tokens = {1, 4, 9, 16, 25, 36, 49, 64, 81, 100};
    for (int32_t& t : tokens) t %= static_cast<int32_t>(trainer.config().vocab_size);
    trainer.sft_step({{"s", tokens, std::vector<uint8_t>(tokens.size(), 1)}});
    adapter.rank = o.lora.rank;
    adapter.alpha = o.lora.alpha;
    adapter.dropout = o.lora.dropout;
    adapter.target_modules = peft_target_modules(trainer.config(), o.lora);
    adapter.base_model = "LiquidAI/" + preset;
    adapter.base_hash = trainer.base_hash();
    adapter.base_hash_dtype = dtype_name(o.lora.base_dtype);
    trainer.for_each_adapter([&](const std::string& name, const Shape& shape, const float* v) {
      Tensor copy(DType::kF32, shape);
      std::memcpy(copy.data(), v, copy.nbytes());
      adapter.tensors.emplace(name, std::move(copy));
    });
    write_peft_adapter(dir, adapter);
  }
  RandomTensorSource base;
  Trainer trainer;
  PeftAdapter adapter;
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

ErrorKind kind_of(const std::function<void()>& action, std::string* message = nullptr) {
  try {
    action();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no error";
  return ErrorKind::kInternal;
}

TEST(PeftAdapter, TheTrainersAdaptersGoOutInPeftLayoutAndComeBackBitForBit) {
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"}) {
    SCOPED_TRACE(preset);
    testing::TempDir tmp("peft");
    const fs::path dir = tmp.file("adapter");
    const TrainOptions o = options(4);
    Trained trained(preset, o, dir.string());

    const nlohmann::json config = read_json(dir / kPeftConfigFile);
    EXPECT_EQ(config.at("peft_type"), "LORA");
    EXPECT_EQ(config.at("task_type"), "CAUSAL_LM");
    EXPECT_EQ(config.at("r"), 4);
    EXPECT_EQ(config.at("lora_alpha"), 8.0);
    EXPECT_EQ(config.at("lora_dropout"), 0.0);
    EXPECT_EQ(config.at("base_model_name_or_path"), std::string("LiquidAI/") + preset);
    // all-linear is written as the modules' short names, which pick the same matrices.
    LoraOptions written = o.lora;
    written.targets = config.at("target_modules").get<std::vector<std::string>>();
    EXPECT_EQ(lora_targets(trained.trainer.config(), written).size(),
              lora_targets(trained.trainer.config(), o.lora).size());
    for (const std::string& t : written.targets) EXPECT_EQ(t.find('.'), std::string::npos) << t;
    // One layer's q_proj: "q_proj" would take every layer's, so the full module name is written.
    LoraOptions one = o.lora;
    one.targets = {"model.layers.1.self_attn.q_proj"};
    if (std::string(preset) == "tiny-qwen3") {
      EXPECT_EQ(peft_target_modules(trained.trainer.config(), one), one.targets);
    }

    const SafetensorsFile file = SafetensorsFile::open((dir / kPeftWeightsFile).string());
    EXPECT_EQ(file.metadata().at("format"), "pt");
    EXPECT_EQ(file.entries().size(), trained.adapter.tensors.size());
    const std::string q_a = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight";
    const std::string conv_b = "base_model.model.model.layers.0.conv.in_proj.lora_B.weight";
    if (std::string(preset) == "tiny-qwen3") {
      EXPECT_TRUE(file.has(q_a));
    }
    if (std::string(preset) == "tiny-lfm2") {
      EXPECT_TRUE(file.has(conv_b));  // conv at layer 0
    }
    for (const SafetensorsEntry& e : file.entries())
      EXPECT_EQ(e.name.rfind("base_model.model.model.layers.", 0), 0u) << e.name;

    const PeftAdapter back = read_peft_adapter(dir.string());
    EXPECT_EQ(back.rank, 4);
    EXPECT_EQ(back.alpha, 8.0);
    EXPECT_EQ(back.target_modules, trained.adapter.target_modules);
    EXPECT_EQ(back.base_hash, trained.adapter.base_hash);
    ASSERT_EQ(back.tensors.size(), trained.adapter.tensors.size());
    bool moved = false;
    for (const auto& [name, tensor] : trained.adapter.tensors) {
      EXPECT_TRUE(same_bits(back.tensors.at(name), tensor)) << name;
      if (name.find("lora_B") != std::string::npos)
        for (int64_t i = 0; i < tensor.numel(); ++i) moved = moved || tensor.as<float>()[i] != 0;
    }
    EXPECT_TRUE(moved) << "the SFT step left every B at zero: the round trip proves little";

    // The adapter starts a trainer (its random init is replaced): the same adapters and logits.
    TrainOptions start = o;
    start.seed = 99;  // another random A, overwritten by the adapter's
    start.lora.init_adapter = dir.string();
    const Trainer restarted(trained.base, start);
    size_t seen = 0;
    restarted.for_each_adapter([&](const std::string& name, const Shape& shape, const float* v) {
      const Tensor& expected = trained.adapter.tensors.at(name);
      EXPECT_EQ(shape, expected.shape()) << name;
      EXPECT_EQ(std::memcmp(v, expected.data(), expected.nbytes()), 0) << name;
      ++seen;
    });
    EXPECT_EQ(seen, trained.adapter.tensors.size());
    const std::vector<int32_t> tokens = {2, 7, 1, 8, 2, 8};
    EXPECT_TRUE(same_bits(restarted.logits(tokens), trained.trainer.logits(tokens)));
  }
}

TEST(PeftAdapter, AnAdapterOfAnotherRankAlphaTargetSetOrBaseIsRefused) {
  testing::TempDir tmp("peft-mismatch");
  const std::string dir = tmp.file("adapter");
  Trained trained("tiny-qwen3", options(4, {"q_proj", "v_proj"}), dir);
  auto start = [&](TrainOptions o, const TensorSource& base) {
    o.lora.init_adapter = dir;
    Trainer t(base, o);
  };
  std::string message;
  EXPECT_EQ(kind_of(
                [&] {
                  start(options(8, {"q_proj", "v_proj"}), trained.base);
                },
                &message),
            ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("has rank 4"), std::string::npos) << message;
  TrainOptions alpha = options(4, {"q_proj", "v_proj"});
  alpha.lora.alpha = 16;
  EXPECT_EQ(kind_of([&] { start(alpha, trained.base); }, &message), ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("lora_alpha"), std::string::npos) << message;
  EXPECT_EQ(kind_of([&] { start(options(4, {"q_proj"}), trained.base); }, &message),
            ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("v_proj.lora_A.weight, which this run's targets"), std::string::npos)
      << message;
  EXPECT_EQ(kind_of([&] { start(options(4), trained.base); }, &message),
            ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("has no"), std::string::npos) << message;
  // Another base: other weights of the same shape (the hash), another shape (the tensors).
  const RandomTensorSource other_weights(preset_config("tiny-qwen3"), 4);
  EXPECT_EQ(kind_of(
                [&] {
                  start(options(4, {"q_proj", "v_proj"}), other_weights);
                },
                &message),
            ErrorKind::kIntegrity);
  EXPECT_NE(message.find("another model"), std::string::npos) << message;
  ModelConfig wider = preset_config("tiny-qwen3");
  wider.hidden_size *= 2;
  const RandomTensorSource other_shape(wider, 3);
  EXPECT_EQ(kind_of(
                [&] {
                  start(options(4, {"q_proj", "v_proj"}), other_shape);
                },
                &message),
            ErrorKind::kInvalidArgument);
  EXPECT_NE(message.find("another base model"), std::string::npos) << message;
  // Without LoRA there is nothing to start.
  TrainOptions full = options(4, {"q_proj", "v_proj"});
  full.lora.rank = 0;
  full.lora.init_adapter = dir;
  EXPECT_THROW(Trainer(trained.base, full), Error);
}

TEST(PeftAdapter, DamagedOrForeignAdapterDirectoriesAreRefusedNamingTheFile) {
  testing::TempDir tmp("peft-bad");
  const fs::path good = tmp.file("good");
  Trained trained("tiny-qwen3", options(2, {"q_proj"}), good.string());
  int case_number = 0;
  // A copy of the good adapter, changed by `damage`; the read must fail with `kind`.
  auto expect_refused = [&](const std::function<void(const fs::path&)>& damage, ErrorKind kind,
                            const std::string& words) {
    const fs::path dir = tmp.file("bad" + std::to_string(case_number++));
    fs::copy(good, dir, fs::copy_options::recursive);
    damage(dir);
    std::string message;
    EXPECT_EQ(kind_of([&] { read_peft_adapter(dir.string()); }, &message), kind) << message;
    EXPECT_NE(message.find(words), std::string::npos) << message;
  };
  auto edit_config = [](const std::function<void(nlohmann::json&)>& edit) {
    return [edit](const fs::path& dir) {
      nlohmann::json config = read_json(dir / kPeftConfigFile);
      edit(config);
      write_text(dir / kPeftConfigFile, config.dump());
    };
  };
  expect_refused([](const fs::path& d) { fs::remove(d / kPeftWeightsFile); }, ErrorKind::kNotFound,
                 "adapter_model.safetensors");
  expect_refused([](const fs::path& d) { fs::remove(d / kPeftConfigFile); }, ErrorKind::kNotFound,
                 "adapter_config.json");
  expect_refused([](const fs::path& d) { write_text(d / kPeftConfigFile, "{\"r\": 2,"); },
                 ErrorKind::kBadFormat, "adapter_config.json");
  expect_refused(edit_config([](nlohmann::json& c) { c.erase("r"); }), ErrorKind::kBadFormat,
                 "lacks \"r\"");
  expect_refused(edit_config([](nlohmann::json& c) { c["lora_alpha"] = "eight"; }),
                 ErrorKind::kBadFormat, "lora_alpha");
  expect_refused(edit_config([](nlohmann::json& c) { c["r"] = 3; }), ErrorKind::kBadFormat,
                 "not of rank r = 3");
  expect_refused(
      [](const fs::path& d) {  // an A without its B
        const SafetensorsFile file = SafetensorsFile::open((d / kPeftWeightsFile).string());
        const std::string a = file.entries().front().name;
        const Tensor kept = file.load(a);
        write_safetensors((d / kPeftWeightsFile).string(), {{a, kept.view()}});
      },
      ErrorKind::kBadFormat, "has no base_model.model.");
  expect_refused(edit_config([](nlohmann::json& c) { c["peft_type"] = "IA3"; }),
                 ErrorKind::kUnsupported, "only LORA");
  expect_refused(edit_config([](nlohmann::json& c) { c["use_dora"] = true; }),
                 ErrorKind::kUnsupported, "use_dora");
  expect_refused(edit_config([](nlohmann::json& c) {
                   c["rank_pattern"] = {{"q_proj", 4}};
                 }),
                 ErrorKind::kUnsupported, "rank_pattern");
  expect_refused(
      [](const fs::path& d) {
        const fs::path file = d / kPeftWeightsFile;
        fs::resize_file(file, fs::file_size(file) / 2);  // a transfer cut short
      },
      ErrorKind::kBadFormat, "adapter_model.safetensors");
  expect_refused(
      [](const fs::path& d) {  // a tensor without PEFT's prefix (a merged weight, say)
        Tensor w(DType::kF32, {2, 2});
        write_safetensors((d / kPeftWeightsFile).string(),
                          {{"model.layers.0.self_attn.q_proj.weight", w.view()}});
      },
      ErrorKind::kBadFormat, "is not a LoRA weight");
  EXPECT_EQ(kind_of([&] { read_peft_adapter(tmp.file("absent")); }), ErrorKind::kNotFound);
}

}  // namespace
}  // namespace stoa::train
