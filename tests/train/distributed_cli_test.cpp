// `stoa train --nproc 2` through the real binary: two rank processes rendezvous on the launcher's
// TCPStore and train (the loss falls, a model and a checkpoint come out); a rank killed with
// kill -9 stops the whole run promptly with an error (no hang), and the run resumes from its last
// checkpoint on 2 ranks.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/process.h"
#include "support/stoa_cli.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using stoa::testing::read_text;
using stoa::testing::run_stoa;

class DistributedCli : public stoa::testing::TempDirTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(
        run_stoa(dir, "model init --preset tiny-qwen3 --seed 1 --out " + (dir / "model").string()),
        0)
        << read_text(dir / "err.txt");
    std::ofstream data(dir / "data.jsonl");
    data
        << "{\"id\": \"a\", \"tokens\": [5, 6, 7, 8, 9, 10, 11, 12], \"mask\": [0,0,0,1,1,1,1,1]}\n"
        << "{\"id\": \"b\", \"tokens\": [20, 21, 22, 23, 24, 25]}\n"
        << "{\"id\": \"c\", \"tokens\": [30, 31, 32, 33, 34, 35, 36]}\n"
        << "{\"id\": \"d\", \"tokens\": [40, 41, 42, 43, 44, 45, 46, 47, 48]}\n";
  }

  std::string sft_args() const {
    return "train --sft --nproc 2 --data " + (dir / "data.jsonl").string() + " --model " +
           (dir / "model").string() + " --lr 3e-3 --batch-tokens 16 --threads 1 --json " +
           "--checkpoint " + (dir / "ckpt").string() + " --out " + (dir / "out").string();
  }
};

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] == '{') out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

TEST_F(DistributedCli, TwoRanksTrain) {
  ASSERT_EQ(run_stoa(dir, sft_args() + " --epochs 5"), 0) << read_text(dir / "err.txt");
  const std::vector<nlohmann::json> steps = json_lines(read_text(dir / "out.txt"));
  ASSERT_GE(steps.size(), 10u);
  EXPECT_LT(steps.back()["loss"].get<double>(), 0.8 * steps.front()["loss"].get<double>());
  EXPECT_TRUE(fs::exists(dir / "out" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "trainer.json"));
  const std::string err = read_text(dir / "err.txt");
  EXPECT_NE(err.find("rank 1 of 2 joined"), std::string::npos) << err;
}

// FSDP through the binary: the start model streamed into the shards, a sharded checkpoint every
// epoch, the model gathered into out/, each rank's memory report; the checkpoint resumes on 2
// ranks at the next step and is refused (with the reason) by a ZeRO-1 trainer.
TEST_F(DistributedCli, TwoFsdpRanksTrainCheckpointAndResume) {
  const std::string fsdp =
      sft_args() + " --sharding fsdp --memory-report " + (dir / "memory").string();
  ASSERT_EQ(run_stoa(dir, fsdp + " --epochs 5"), 0) << read_text(dir / "err.txt");
  const std::vector<nlohmann::json> steps = json_lines(read_text(dir / "out.txt"));
  ASSERT_GE(steps.size(), 10u);
  EXPECT_LT(steps.back()["loss"].get<double>(), 0.8 * steps.front()["loss"].get<double>());
  EXPECT_TRUE(fs::exists(dir / "out" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "shards" / "rank-00001-of-00002.safetensors"));
  for (int r = 0; r < 2; ++r) {
    const nlohmann::json report =
        nlohmann::json::parse(read_text(dir / "memory" / ("rank-" + std::to_string(r) + ".json")));
    EXPECT_EQ(report["world"].get<int>(), 2);
    EXPECT_GT(report["hwm_growth_bytes"].get<int64_t>(), 0);
  }
  const int64_t step =
      nlohmann::json::parse(read_text(dir / "ckpt" / "trainer.json"))["step"].get<int64_t>();
  ASSERT_EQ(run_stoa(dir, fsdp + " --resume " + (dir / "ckpt").string() + " --epochs 6"), 0)
      << read_text(dir / "err.txt");
  const std::vector<nlohmann::json> more = json_lines(read_text(dir / "out.txt"));
  ASSERT_FALSE(more.empty()) << read_text(dir / "err.txt");
  EXPECT_EQ(more.front()["step"].get<int64_t>(), step + 1);
  EXPECT_NE(run_stoa(dir, sft_args() + " --resume " + (dir / "ckpt").string() + " --epochs 7"), 0);
  EXPECT_NE(read_text(dir / "err.txt").find("sharding = fsdp"), std::string::npos)
      << read_text(dir / "err.txt");
}

// LoRA on 2 ranks through the binary: the adapters learn, rank 0 writes the one-rank LoRA
// checkpoint (adapters and their moments, no base), which resumes on 2 ranks at the next step.
TEST_F(DistributedCli, TwoRanksTrainLoraAdaptersAndResume) {
  const std::string lora = sft_args() + " --lora-rank 4";
  ASSERT_EQ(run_stoa(dir, lora + " --epochs 5"), 0) << read_text(dir / "err.txt");
  const std::vector<nlohmann::json> steps = json_lines(read_text(dir / "out.txt"));
  ASSERT_GE(steps.size(), 10u);
  EXPECT_LT(steps.back()["loss"].get<double>(), 0.95 * steps.front()["loss"].get<double>());
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "adapters.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "ckpt" / "model"));
  const int64_t step =
      nlohmann::json::parse(read_text(dir / "ckpt" / "trainer.json"))["step"].get<int64_t>();
  ASSERT_EQ(run_stoa(dir, lora + " --resume " + (dir / "ckpt").string() + " --epochs 6"), 0)
      << read_text(dir / "err.txt");
  const std::vector<nlohmann::json> more = json_lines(read_text(dir / "out.txt"));
  ASSERT_FALSE(more.empty()) << read_text(dir / "err.txt");
  EXPECT_EQ(more.front()["step"].get<int64_t>(), step + 1);
}

TEST_F(DistributedCli, KilledRankStopsTheRunWhichResumes) {
  const fs::path log = dir / "run.log";
  std::vector<std::string> argv{stoa::testing::stoa_binary()};
  std::istringstream words(sft_args() + " --epochs 400");
  for (std::string w; words >> w;) argv.push_back(w);
  stoa::Process run = stoa::Process::start(argv, stoa::logged_to(log.string(), true));
  // Wait for a checkpoint, then kill rank 1 (the launcher logs each rank's pid).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(dir / "ckpt" / "trainer.json") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(fs::exists(dir / "ckpt" / "trainer.json")) << read_text(log);
  std::smatch match;
  const std::string text = read_text(log);
  ASSERT_TRUE(std::regex_search(text, match, std::regex("rank 1 of 2 pid (\\d+)"))) << text;
  ASSERT_EQ(::kill(std::stoi(match[1].str()), SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  const std::optional<int> code = run.wait_for(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value()) << "the run hung after a rank was killed\n" << read_text(log);
  EXPECT_EQ(*code, 1) << read_text(log);
  std::printf("stopped %.2f s after the kill\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count());
  const std::string after = read_text(log);
  EXPECT_NE(after.find("rank 1 exited with status 137"), std::string::npos) << after;

  // Resume on 2 ranks from the last checkpoint: it continues at the next step.
  nlohmann::json meta = nlohmann::json::parse(read_text(dir / "ckpt" / "trainer.json"));
  const int64_t step = meta["step"].get<int64_t>();
  ASSERT_GT(step, 0);
  ASSERT_EQ(run_stoa(dir, sft_args() + " --resume " + (dir / "ckpt").string() + " --epochs " +
                              std::to_string(step / 2 + 2)),
            0)
      << read_text(dir / "err.txt");
  const std::vector<nlohmann::json> steps = json_lines(read_text(dir / "out.txt"));
  ASSERT_FALSE(steps.empty()) << read_text(dir / "err.txt");
  EXPECT_EQ(steps.front()["step"].get<int64_t>(), step + 1);
  EXPECT_TRUE(fs::exists(dir / "out" / "model.safetensors"));
}

}  // namespace
