// `stoa model export-hf` from what a run leaves behind. The run is made the way `stoa run` makes
// one, short of the hub: its run.toml written by the run config's own writer, its initial model
// the warm-start asset (a real trained LFM2 with its tokenizer and chat template), and its
// checkpoints written by the trainer's checkpoint code after real SFT steps. The export (the
// built binary, as an operator runs it) must take the newest checkpoint's weights, the tokenizer
// of the model the run started from and the run's sampling; a checkpoint alone needs
// --tokenizer-from; bad requests are refused through the command line.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "app/export/hf_export_from.h"
#include "core/dtype.h"
#include "model/arch_registry.h"
#include "model/weights.h"
#include "roles/run/run_config.h"
#include "support/bf16_of.h"
#include "support/source_dir.h"
#include "support/stoa_cli.h"
#include "support/temp_dir.h"
#include "train/trainer.h"

namespace stoa {
namespace {

namespace fs = std::filesystem;

fs::path warm_start_dir() {
  return test::source_dir() / "assets" / "warm-start";
}

using test::expect_bf16_of;

bool same_bits(const ModelWeights& a, const ModelWeights& b) {
  for (const auto& [name, tensor] : a.tensors)
    if (std::memcmp(tensor.data(), b.at(name).data(), tensor.nbytes()) != 0) return false;
  return true;
}

// A run directory as `stoa run` leaves it: run.toml, the initial model it names, and a
// checkpoint written by the trainer after one SFT step.
class RunExport : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy(warm_start_dir(), model);
    initial = load_model_dir(model.string());
    run::RunConfig c;
    c.run_dir = run_dir.string();
    c.model_dir = model.string();
    c.data_dir = tmp.file("data");
    c.task = "search";
    c.hub.join_token = "token";
    c.hub.sampling.temperature = 0.7f;
    c.hub.sampling.top_p = 0.9f;
    c.hub.sampling.top_k = 20;
    fs::create_directories(run_dir);
    run::save_run_config(c, (run_dir / "run.toml").string());

    train::TrainOptions options;
    options.threads = 1;
    options.optimizer.lr = 1e-2;  // a visible change after one step
    trainer = std::make_unique<train::Trainer>(initial, options);
    step();
    trainer->save_checkpoint((run_dir / "checkpoint").string());
    after_one = trainer->weights();
  }

  void step() {
    const std::vector<int32_t> tokens = {4086, 10, 20, 30, 40, 50, 4087};
    trainer->sft_step({{"a", tokens, std::vector<uint8_t>(tokens.size(), 1)}});
  }

  nlohmann::json export_cli(const std::string& args, int expect_status = 0) {
    const int status = testing::run_stoa(tmp.path(), "model export-hf " + args);
    EXPECT_EQ(status, expect_status) << testing::read_text(tmp.file("err.txt"));
    return status == 0 ? nlohmann::json::parse(testing::read_text(tmp.file("out.txt")))
                       : nlohmann::json();
  }
  std::string last_error() { return testing::read_text(tmp.file("err.txt")); }

  testing::TempDir tmp{"export-run"};
  fs::path model = tmp.file("model"), run_dir = tmp.file("run");
  ModelWeights initial, after_one;
  std::unique_ptr<train::Trainer> trainer;
};

TEST_F(RunExport, ARunDirExportsItsCheckpointWithTheRunsTokenizerAndSampling) {
  const fs::path out = tmp.file("exported");
  const nlohmann::json summary =
      export_cli("--from " + run_dir.string() + " --out " + out.string());
  EXPECT_EQ(summary.at("from"), "run dir");
  EXPECT_EQ(summary.at("checkpoint_step"), 1);
  EXPECT_EQ(summary.at("tokenizer_from"), model.string());
  EXPECT_EQ(summary.at("dtype"), "bf16");
  EXPECT_EQ(summary.at("chat_template"), "tokenizer_config.json");

  const ModelWeights exported = load_model_dir(out.string());
  ASSERT_FALSE(same_bits(after_one, initial)) << "the SFT step changed nothing";
  expect_bf16_of(exported, after_one);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    EXPECT_EQ(testing::read_text(out / name), testing::read_text(model / name)) << name;
  const nlohmann::json gen =
      nlohmann::json::parse(testing::read_text(out / "generation_config.json"));
  EXPECT_EQ(gen.at("do_sample"), true);
  EXPECT_EQ(gen.at("temperature"), 0.7);  // the float's shortest form, not 0.699999988
  EXPECT_EQ(gen.at("top_p"), 0.9);
  EXPECT_EQ(gen.at("top_k"), 20);
  EXPECT_EQ(gen.at("eos_token_id"), initial.config.eos_token_id);
  EXPECT_EQ(gen.at("bos_token_id"), initial.config.bos_token_id);
  EXPECT_EQ(gen.at("pad_token_id"), initial.config.pad_token_id);

  // The run config itself names the same run; f32 is the checkpoint verbatim.
  const fs::path f32 = tmp.file("exported-f32");
  const nlohmann::json s2 = export_cli("--from " + (run_dir / "run.toml").string() + " --out " +
                                       f32.string() + " --dtype f32");
  EXPECT_EQ(s2.at("from"), "run config");
  EXPECT_TRUE(same_bits(load_model_dir(f32.string()), after_one));
}

// A kill between the trainer's renames leaves the newer checkpoint in checkpoint.tmp: the export
// takes it (highest step), not the older one in checkpoint/.
TEST_F(RunExport, TheNewestCompleteCheckpointIsTaken) {
  step();
  trainer->save_checkpoint((run_dir / "checkpoint.tmp").string());
  const ModelWeights after_two = trainer->weights();
  int64_t found_step = -1;
  EXPECT_EQ(app::newest_checkpoint((run_dir / "checkpoint").string(), &found_step),
            (run_dir / "checkpoint.tmp").string());
  EXPECT_EQ(found_step, 2);
  const fs::path out = tmp.file("exported");
  const nlohmann::json summary = export_cli("--from " + run_dir.string() + " --out " +
                                            out.string() + " --dtype f32 --shard-mb 1");
  EXPECT_EQ(summary.at("checkpoint_step"), 2);
  EXPECT_GT(summary.at("shards").get<int>(), 1);  // 7 MB of f32 in 1 MB shards
  EXPECT_TRUE(same_bits(load_model_dir(out.string()), after_two));
}

TEST_F(RunExport, ACheckpointAloneNeedsTheTokenizerNamed) {
  const fs::path ckpt = run_dir / "checkpoint";
  export_cli("--from " + ckpt.string() + " --out " + tmp.file("a"), 1);
  EXPECT_NE(last_error().find("--tokenizer-from"), std::string::npos) << last_error();
  EXPECT_FALSE(fs::exists(tmp.file("a")));
  const nlohmann::json summary = export_cli("--from " + ckpt.string() + " --out " + tmp.file("b") +
                                            " --tokenizer-from " + model.string());
  EXPECT_EQ(summary.at("from"), "checkpoint");
  EXPECT_FALSE(summary.contains("sampling"));
  expect_bf16_of(load_model_dir(tmp.file("b")), after_one);
  // Without a run config, a run dir is the same case.
  fs::remove(run_dir / "run.toml");
  export_cli("--from " + run_dir.string() + " --out " + tmp.file("c"), 1);
  EXPECT_NE(last_error().find("--tokenizer-from"), std::string::npos) << last_error();
}

TEST_F(RunExport, RefusesBadRequestsClearly) {
  export_cli("--from " + run_dir.string() + " --out " + tmp.file("x") + " --dtype f16", 1);
  EXPECT_NE(last_error().find("--dtype must be bf16 or f32"), std::string::npos) << last_error();
  fs::create_directories(tmp.file("full"));
  std::ofstream(tmp.file("full/keep.txt")) << "keep";
  export_cli("--from " + run_dir.string() + " --out " + tmp.file("full"), 1);
  EXPECT_NE(last_error().find("not empty"), std::string::npos) << last_error();
  EXPECT_EQ(testing::read_text(tmp.file("full/keep.txt")), "keep");
  export_cli("--from " + tmp.file("nowhere") + " --out " + tmp.file("y"), 1);
  EXPECT_NE(last_error().find("does not exist"), std::string::npos) << last_error();
  fs::remove(model / "tokenizer.json");
  export_cli("--from " + run_dir.string() + " --out " + tmp.file("z"), 1);
  EXPECT_NE(last_error().find("tokenizer.json is missing"), std::string::npos) << last_error();
  // A run that has not checkpointed yet.
  fs::remove_all(run_dir / "checkpoint");
  export_cli("--from " + run_dir.string() + " --out " + tmp.file("w"), 1);
  EXPECT_NE(last_error().find("no checkpoint yet"), std::string::npos) << last_error();
}

}  // namespace
}  // namespace stoa
