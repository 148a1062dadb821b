// The trainer's commands through the real `stoa` binary: `stoa train --sft` on a tiny model
// (loss falls, a complete model directory and a checkpoint come out, --resume continues), bad
// data fails naming file:line, and `stoa bench train --json` emits a well-formed report.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/stoa_cli.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;

using stoa::testing::read_text;
using stoa::testing::run_stoa;

using TrainCli = stoa::testing::TempDirTest;

TEST_F(TrainCli, SftTrainsWritesAModelAndResumes) {
  ASSERT_EQ(
      run_stoa(dir, "model init --preset tiny-qwen3 --seed 1 --out " + (dir / "model").string()), 0)
      << read_text(dir / "err.txt");
  {
    std::ofstream data(dir / "data.jsonl");
    data
        << "{\"id\": \"a\", \"tokens\": [5, 6, 7, 8, 9, 10, 11, 12], \"mask\": [0,0,0,1,1,1,1,1]}\n"
        << "{\"id\": \"b\", \"tokens\": [20, 21, 22, 23, 24, 25]}\n"
        << "{\"id\": \"c\", \"tokens\": [30, 31, 32, 33, 34, 35, 36]}\n";
  }
  const std::string common = "train --sft --data " + (dir / "data.jsonl").string() + " --model " +
                             (dir / "model").string() +
                             " --lr 3e-3 --batch-tokens 16 --threads 1 --json --checkpoint " +
                             (dir / "ckpt").string();
  ASSERT_EQ(run_stoa(dir, common + " --epochs 6 --out " + (dir / "out").string()), 0)
      << read_text(dir / "err.txt");
  std::istringstream lines(read_text(dir / "out.txt"));
  std::vector<nlohmann::json> steps;
  for (std::string line; std::getline(lines, line);) steps.push_back(nlohmann::json::parse(line));
  ASSERT_GE(steps.size(), 12u);  // 3 examples of 6–8 tokens, 16 per batch: 2 steps an epoch
  EXPECT_LT(steps.back()["loss"].get<double>(), 0.7 * steps.front()["loss"].get<double>());
  EXPECT_TRUE(fs::exists(dir / "out" / "config.json"));
  EXPECT_TRUE(fs::exists(dir / "out" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "trainer.json"));
  // Asking for more epochs from the checkpoint continues at the next step.
  ASSERT_EQ(run_stoa(dir, common + " --epochs 7 --resume " + (dir / "ckpt").string() + " --out " +
                              (dir / "out2").string()),
            0)
      << read_text(dir / "err.txt");
  std::istringstream more(read_text(dir / "out.txt"));
  std::string first;
  std::getline(more, first);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(nlohmann::json::parse(first)["step"].get<int64_t>(),
            steps.back()["step"].get<int64_t>() + 1);
}

// LoRA through the CLI: the loss falls with only adapters trained, the checkpoint holds the
// adapters (no model directory), and it resumes on its --model; the plan prints the LoRA columns.
TEST_F(TrainCli, SftWithLoraTrainsAdaptersAndResumesOnItsBase) {
  ASSERT_EQ(
      run_stoa(dir, "model init --preset tiny-qwen3 --seed 1 --out " + (dir / "model").string()), 0)
      << read_text(dir / "err.txt");
  {
    std::ofstream data(dir / "data.jsonl");
    data << "{\"id\": \"a\", \"tokens\": [5, 6, 7, 8, 9, 10, 11, 12]}\n"
         << "{\"id\": \"b\", \"tokens\": [20, 21, 22, 23, 24, 25]}\n";
  }
  const std::string common = "train --sft --data " + (dir / "data.jsonl").string() + " --model " +
                             (dir / "model").string() +
                             " --lora-rank 4 --lora-alpha 8 --lora-base-dtype f32 --lr 1e-2 "
                             "--batch-tokens 16 --threads 1 --json --checkpoint " +
                             (dir / "ckpt").string();
  ASSERT_EQ(run_stoa(dir, common + " --epochs 8 --out " + (dir / "out").string()), 0)
      << read_text(dir / "err.txt");
  std::istringstream lines(read_text(dir / "out.txt"));
  std::vector<nlohmann::json> steps;
  for (std::string line; std::getline(lines, line);) steps.push_back(nlohmann::json::parse(line));
  ASSERT_GE(steps.size(), 8u);
  EXPECT_LT(steps.back()["loss"].get<double>(), 0.9 * steps.front()["loss"].get<double>());
  EXPECT_TRUE(fs::exists(dir / "out" / "model.safetensors"));  // the merged model
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "adapters.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "ckpt" / "model"));
  ASSERT_EQ(run_stoa(dir, common + " --epochs 9 --resume " + (dir / "ckpt").string() + " --out " +
                              (dir / "out2").string()),
            0)
      << read_text(dir / "err.txt");
  std::string first;
  std::istringstream more(read_text(dir / "out.txt"));
  std::getline(more, first);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(nlohmann::json::parse(first)["step"].get<int64_t>(),
            steps.back()["step"].get<int64_t>() + 1);
  ASSERT_EQ(run_stoa(dir,
                     "bench train --plan --preset lfm2-8b-a1b --lora --ranks 1 "
                     "--micro-batch-tokens 4096 --gpu-gb 80 --json"),
            0)
      << read_text(dir / "err.txt");
  const nlohmann::json plan = nlohmann::json::parse(read_text(dir / "out.txt"));
  EXPECT_GT(plan["lora"]["adapter_parameters"].get<int64_t>(), 0);
  EXPECT_GT(plan["plans"][0]["frozen_base_bytes"].get<int64_t>(), 0);
}

TEST_F(TrainCli, BadDataNamesFileAndLine) {
  ASSERT_EQ(run_stoa(dir, "model init --preset tiny-qwen3 --out " + (dir / "model").string()), 0);
  {
    std::ofstream data(dir / "bad.jsonl");
    data << "{\"tokens\": [1, 2, 3]}\n{\"tokens\": [1, 99999]}\n";
  }
  EXPECT_NE(run_stoa(dir, "train --sft --data " + (dir / "bad.jsonl").string() + " --model " +
                              (dir / "model").string() + " --out " + (dir / "out").string()),
            0);
  EXPECT_NE(read_text(dir / "err.txt").find("bad.jsonl:2"), std::string::npos)
      << read_text(dir / "err.txt");
  EXPECT_FALSE(fs::exists(dir / "out"));
}

TEST_F(TrainCli, BenchTrainJson) {
  ASSERT_EQ(run_stoa(dir,
                     "bench train --json --archs qwen3,lfm2_moe --sizes 10m --seq-len 64 "
                     "--prompt-tokens 8 --batch 1 --steps 1 --warmup 0 --threads 1"),
            0)
      << read_text(dir / "err.txt");
  nlohmann::json report = nlohmann::json::parse(read_text(dir / "out.txt"));
  EXPECT_GT(report["sgemm_gflops"].get<double>(), 0.0);
  ASSERT_EQ(report["results"].size(), 2u);
  for (const auto& r : report["results"]) {
    EXPECT_GT(r["tokens_per_second"].get<double>(), 0.0);
    EXPECT_GT(r["mfu"].get<double>(), 0.0);
    EXPECT_LT(r["mfu"].get<double>(), 1.5);
    EXPECT_GT(r["params"].get<int64_t>(), 5'000'000);
  }
}

}  // namespace
