// [trainer.lora]: read, refused in words, written back by the one writer, and checked against the
// model and the ranks before a run starts (roles/run/run_config_lora.h).
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"
#include "model/peft_adapter.h"
#include "model/presets.h"
#include "roles/run/minimal_run_config.h"
#include "roles/run/run_config.h"
#include "roles/run/run_config_lora.h"
#include "train/lora.h"

namespace stoa::run {
namespace {

namespace fs = std::filesystem;

RunConfig parse_with(const std::string& extra) {
  return parse_run_config(std::string(kMinimalRunToml) + extra, "run.toml", "/base");
}

// The message parse_run_config throws for `extra`, "" when it parses.
std::string refusal(const std::string& extra) {
  try {
    parse_with(extra);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

TEST(RunConfigLora, AbsentMeansFullFineTuning) {
  EXPECT_FALSE(parse_with("").train.lora.enabled());
  EXPECT_EQ(to_toml(minimal_run_config()).find("lora"), std::string::npos);
}

TEST(RunConfigLora, EveryKeyIsRead) {
  const RunConfig c = parse_with(R"(
[trainer]
lr = 1e-4
[trainer.lora]
rank = 4
alpha = 8
dropout = 0.05
target_modules = ["q_proj", "v_proj"]
base_dtype = "f32"
)");
  const train::LoraOptions& l = c.train.lora;
  EXPECT_EQ(l.rank, 4);
  EXPECT_EQ(l.alpha, 8.0);
  EXPECT_EQ(l.dropout, 0.05);
  EXPECT_EQ(l.targets, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(l.base_dtype, DType::kF32);
  EXPECT_EQ(c.train.optimizer.lr, 1e-4);  // [trainer] itself still read
  // Defaults beside a rank alone; one module name as a string.
  const train::LoraOptions d = parse_with("[trainer.lora]\nrank = 2\n").train.lora;
  EXPECT_EQ(d.alpha, 16.0);
  EXPECT_EQ(d.targets, (std::vector<std::string>{"all-linear"}));
  EXPECT_EQ(d.base_dtype, DType::kBF16);
  EXPECT_EQ(parse_with("[trainer.lora]\nrank = 2\ntarget_modules = \"w1\"\n").train.lora.targets,
            (std::vector<std::string>{"w1"}));
}

TEST(RunConfigLora, BadValuesAreRefusedNamingTheKey) {
  EXPECT_NE(refusal("[trainer.lora]\nalpha = 8\n").find("[trainer.lora] needs rank"),
            std::string::npos);
  EXPECT_NE(refusal("[trainer.lora]\nrank = 0\n").find("[trainer.lora] rank must be"),
            std::string::npos);
  EXPECT_NE(refusal("[trainer.lora]\nrank = -2\n").find("rank must be"), std::string::npos);
  EXPECT_NE(refusal("[trainer.lora]\nrank = 1.5\n").find("rank must be"), std::string::npos);
  EXPECT_NE(refusal("[trainer.lora]\nrank = 4\ndropout = 1.0\n").find("lora dropout"),
            std::string::npos);
  EXPECT_NE(refusal("[trainer.lora]\nrank = 4\nalpha = 0\n").find("lora alpha"), std::string::npos);
  EXPECT_NE(refusal("[trainer.lora]\nrank = 4\ntarget_modules = []\n").find("target_modules"),
            std::string::npos);
  EXPECT_NE(refusal("[trainer.lora]\nrank = 4\ntarget_modules = [3]\n").find("target_modules"),
            std::string::npos);
  EXPECT_NE(refusal("[trainer.lora]\nrank = 4\nbase_dtype = \"int4\"\n").find("base_dtype"),
            std::string::npos);
  EXPECT_NE(refusal("[trainer.lora]\nrank = 4\nranks = 8\n").find("unknown key 'ranks'"),
            std::string::npos);
  EXPECT_NE(refusal("[trainer]\nlora = 8\n").find("lora must be a table"), std::string::npos);
  const std::string fsdp = refusal("[trainer]\nsharding = \"fsdp\"\n[trainer.lora]\nrank = 4\n");
  EXPECT_NE(fsdp.find("one process so far"), std::string::npos) << fsdp;
  EXPECT_NE(fsdp.find("run.toml"), std::string::npos) << fsdp;
}

TEST(RunConfigLora, WrittenAndReadBack) {
  RunConfig c = minimal_run_config();
  train::LoraOptions& l = c.train.lora;
  l.rank = 16;
  l.alpha = 0.1 + 0.2;  // no short decimal: the writer's shortest form must read back exactly
  l.dropout = 0.1;
  l.targets = {"q_proj", "conv.in_proj", "weird \"name\"\\\t"};
  l.base_dtype = DType::kF32;
  const std::string text = to_toml(c);
  ASSERT_NE(text.find("\n[trainer.lora]\n"), std::string::npos) << text;
  const train::LoraOptions back = parse_run_config(text, "w.toml", "").train.lora;
  EXPECT_EQ(back.rank, l.rank);
  EXPECT_EQ(back.alpha, l.alpha);
  EXPECT_EQ(back.dropout, l.dropout);
  EXPECT_EQ(back.targets, l.targets);
  EXPECT_EQ(back.base_dtype, l.base_dtype);
  EXPECT_TRUE(back.init_adapter.empty());
  // init_adapter: relative to the config's directory, written back as resolved.
  const RunConfig with = parse_with("[trainer.lora]\nrank = 2\ninit_adapter = \"adapters/a\"\n");
  EXPECT_EQ(with.train.lora.init_adapter, "/base/adapters/a");
  EXPECT_EQ(parse_run_config(to_toml(with), "w.toml", "").train.lora.init_adapter,
            "/base/adapters/a");
  EXPECT_NE(refusal("[trainer.lora]\nrank = 2\ninit_adapter = 3\n").find("init_adapter"),
            std::string::npos);
}

TEST(RunConfigLora, TargetsAndTheInitAdapterAreCheckedAgainstTheModel) {
  const fs::path dir =
      fs::temp_directory_path() / ("run_config_lora_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << model_config_to_json(preset_config("tiny-lfm2")).dump();
  train::TrainOptions t;
  check_lora_run(t, "/nonexistent");  // no LoRA: nothing read, nothing refused
  t.lora.rank = 4;
  t.lora.targets = {"q_proj", "w1"};
  EXPECT_NO_THROW(check_lora_run(t, dir.string()));
  t.lora.targets = {"q_proj", "qkv"};
  try {
    check_lora_run(t, dir.string());
    ADD_FAILURE() << "an unknown target was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("lora target 'qkv'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[trainer.lora]"), std::string::npos) << e.what();
  }
  // A PEFT adapter to start from must fit: rank 2 on q_proj, not the run's rank 4.
  train::LoraOptions q2;
  q2.rank = 2;
  q2.targets = {"q_proj"};
  PeftAdapter adapter;
  adapter.rank = 2;
  adapter.alpha = 16;
  adapter.target_modules = {"q_proj"};
  for (const train::LoraTarget& target : train::lora_targets(preset_config("tiny-lfm2"), q2)) {
    adapter.tensors.emplace(train::lora_a_name(target), Tensor(DType::kF32, {2, target.in}));
    adapter.tensors.emplace(train::lora_b_name(target), Tensor(DType::kF32, {target.out, 2}));
  }
  write_peft_adapter((dir / "adapter").string(), adapter);
  t.lora.targets = {"q_proj"};
  t.lora.init_adapter = (dir / "adapter").string();
  try {
    check_lora_run(t, dir.string());
    ADD_FAILURE() << "an adapter of rank 2 was accepted for rank 4";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("[trainer.lora] init_adapter: LoRA adapter"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("has rank 2"), std::string::npos) << e.what();
  }
  t.lora.rank = 2;
  EXPECT_NO_THROW(check_lora_run(t, dir.string()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoa::run
