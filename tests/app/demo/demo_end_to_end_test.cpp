// `stoa demo` end to end, small: every stage runs as in the default demo (separate processes,
// HTTP on loopback, PULSE sync, the trainer training on streamed rollouts), on a 1,500-abstract
// corpus with a short SFT and one minute of RL (and on, if the machine is loaded, until the trainer
// took a step: --min-steps, so no step count depends on the machine's speed). Checks that the run
// happened and the summary is complete — not that the model learned (that takes the full-size
// run: docs/results.md).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/file_text.h"
#include "support/stoa_cli.h"

namespace {
namespace fs = std::filesystem;

bool has_demo_command(const std::string& exe) {
  return std::system((exe + " demo --help > /dev/null 2>&1").c_str()) == 0;
}

struct DemoRun {
  int status;           // std::system's
  std::string printed;  // stdout and stderr
};
// `exe demo --fresh --dir <dir> <args>`, its output through the file `out`.
DemoRun run_demo(const std::string& exe, const fs::path& dir, const std::string& args,
                 const fs::path& out) {
  const std::string cmd =
      exe + " demo --fresh --dir " + dir.string() + args + " > " + out.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  return {status, stoa::testing::read_text(out)};
}

TEST(DemoEndToEnd, SmallDemoRunsAndReportsEveryFigure) {
  const std::string exe = stoa::testing::stoa_binary("");
  ASSERT_FALSE(exe.empty()) << "STOA_BINARY is not set";
  // Only a build without libtorch may lack `stoa demo`; in a libtorch build a binary that cannot
  // show the demo's help is broken, and that is a failure, not a skip.
  const char* torch = std::getenv("STOA_WITH_TORCH");
  if (!torch || std::string(torch) != "1") GTEST_SKIP() << "`stoa demo` needs the libtorch build";
  ASSERT_TRUE(has_demo_command(exe)) << exe << " demo --help failed in a libtorch build";
  const fs::path dir = fs::temp_directory_path() / ("stoa-demo-test-" + std::to_string(::getpid()));
  const fs::path summary = dir.string() + "-summary.json";
  const fs::path out = dir.string() + "-out.txt";
  const auto [rc, printed] = run_demo(
      exe, dir,
      " --papers 1500 --questions 300 --vocab-size 1024 --sft-examples 24 --copy-curriculum"
      " --sft-epochs 1 --sft-target 1 --sft-snapshot-every 5 --sft-probe-questions 6"
      " --minutes 1 --min-steps 1 --eval-limit 8 --workers 2"
      " --group-size 4 --groups-per-step 2 --json-summary " +
          summary.string(),
      out);
  ASSERT_EQ(rc, 0) << printed;
  std::ifstream in(summary);
  ASSERT_TRUE(in.good()) << printed;
  const nlohmann::json s = nlohmann::json::parse(in);
  for (const char* key : {"pass1_before", "pass1_after", "steps", "versions", "rollouts_accepted",
                          "rollouts_dropped_stale", "dppo_masked_fraction", "patch_bytes_mean",
                          "full_int8_bytes", "trainer_busy_fraction", "worker_idle_fraction",
                          "patch_int8_share_mean", "lr", "lora_rank"})
    EXPECT_TRUE(s.contains(key)) << key;
  EXPECT_EQ(s["lora_rank"], 0);
  EXPECT_FALSE(s.contains("patch_int8_share_error")) << s.dump();
  EXPECT_GE(s["steps"].get<double>(), 1) << printed;
  EXPECT_GE(s["versions"].get<double>(), 2);
  EXPECT_GT(s["rollouts_accepted"].get<double>(), 0);
  EXPECT_GT(s["full_int8_bytes"].get<double>(), 0);
  for (const char* key : {"pass1_before", "pass1_after", "dppo_masked_fraction",
                          "trainer_busy_fraction", "worker_idle_fraction"}) {
    EXPECT_GE(s[key].get<double>(), 0.0) << key;
    EXPECT_LE(s[key].get<double>(), 1.0) << key;
  }
  // The SFT ran towards a held-out target: 6 train questions kept out of its data, every 5th
  // step's snapshot scored on them; the tiny model cannot reach pass@1 1, so the SFT ran to its
  // end and its final model is the warm start.
  std::ifstream probe_in(dir / "probe.jsonl");
  int probe_lines = 0;
  for (std::string line; std::getline(probe_in, line);) probe_lines += !line.empty();
  EXPECT_EQ(probe_lines, 6);
  std::ifstream sft_probe(dir / "logs" / "sft-probe.json");
  ASSERT_TRUE(sft_probe.good()) << printed;
  const nlohmann::json sp = nlohmann::json::parse(sft_probe);
  EXPECT_FALSE(sp["reached"].get<bool>());
  EXPECT_GE(sp["curve"].size(), 1u) << sp.dump();
  EXPECT_EQ(sp["curve"][0]["step"], 5);
  EXPECT_TRUE(fs::exists(dir / "model-sft" / "config.json"));
  EXPECT_TRUE(fs::exists(dir / "model-sft" / "tokenizer.json"));
  EXPECT_FALSE(fs::exists(dir / "model-sft-snapshots"));
  EXPECT_NE(printed.find("held-out pass@1"), std::string::npos) << printed;
  // Progress was visible while it ran.
  EXPECT_NE(printed.find("[demo] rl "), std::string::npos) << printed;
  EXPECT_TRUE(fs::exists(dir / "run" / "steps.jsonl"));
  // The committed warm start was made on the full-size data, so it did not fit this small demo:
  // said, and the SFT ran here; the model it trained records how it was made.
  if (const char* src = std::getenv("STOA_SOURCE_DIR");
      src && fs::exists(fs::path(src) / "assets" / "warm-start")) {
    EXPECT_NE(printed.find("does not fit"), std::string::npos) << printed;
  }
  EXPECT_EQ(s["warm_start"], "");
  EXPECT_TRUE(fs::exists(dir / "model-sft" / "provenance.json"));

  // A second demo on the same data starts RL from the first one's SFT model: no model init,
  // demonstrations or SFT there; the summary names the warm start. It trains LoRA adapters
  // (--lora 4): the checkpoint holds them alone, and what is evaluated after is the base and the
  // adapters merged.
  const std::string small_data = " --papers 1500 --questions 300 --vocab-size 1024";
  const std::string small_rl =
      " --eval-limit 4 --workers 2 --group-size 4 --groups-per-step 2 --minutes 0.5 --min-steps 1";
  const fs::path warm_dir = dir.string() + "-warm";
  const fs::path warm_summary = dir.string() + "-warm-summary.json";
  const auto [wrc, wprinted] =
      run_demo(exe, warm_dir,
               small_data + small_rl + " --warm-start " + (dir / "model-sft").string() +
                   " --lora 4 --json-summary " + warm_summary.string(),
               out);
  ASSERT_EQ(wrc, 0) << wprinted;
  std::ifstream win(warm_summary);
  ASSERT_TRUE(win.good()) << wprinted;
  const nlohmann::json ws = nlohmann::json::parse(win);
  EXPECT_EQ(ws["warm_start"], (dir / "model-sft").string());
  EXPECT_GE(ws["steps"].get<double>(), 1) << wprinted;
  EXPECT_NE(wprinted.find("warm start: "), std::string::npos) << wprinted;
  EXPECT_FALSE(fs::exists(warm_dir / "model-init"));
  EXPECT_FALSE(fs::exists(warm_dir / "sft.jsonl"));
  EXPECT_TRUE(fs::exists(warm_dir / "model-sft" / "provenance.json"));
  EXPECT_EQ(ws["lora_rank"], 4);
  EXPECT_DOUBLE_EQ(ws["lr"].get<double>(), 2e-3);  // --lora-lr's default
  EXPECT_TRUE(fs::exists(warm_dir / "run" / "checkpoint" / "adapters.safetensors"));
  EXPECT_FALSE(fs::exists(warm_dir / "run" / "checkpoint" / "model"));
  EXPECT_TRUE(fs::exists(warm_dir / "run" / "merged" / "config.json"));
  EXPECT_TRUE(fs::exists(warm_dir / "run" / "merged" / "tokenizer.json"));
  EXPECT_NE(wprinted.find("eval-after: pass@1"), std::string::npos) << wprinted;
  EXPECT_FALSE(ws.contains("patch_int8_share_error")) << ws.dump();

  // Asked for explicitly, a warm start made on other data is refused before anything trains.
  const fs::path other_dir = dir.string() + "-other";
  const auto [orc, oprinted] =
      run_demo(exe, other_dir,
               " --papers 1400 --questions 300 --vocab-size 1024" + small_rl + " --warm-start " +
                   (dir / "model-sft").string(),
               out);
  EXPECT_NE(orc, 0) << oprinted;
  EXPECT_NE(oprinted.find("does not fit this demo"), std::string::npos) << oprinted;
  EXPECT_FALSE(fs::exists(other_dir / "model-sft"));
  fs::remove_all(warm_dir);
  fs::remove(warm_summary);
  fs::remove_all(other_dir);

  // The int8-vs-f32 mismatch ablation on the demo's SFT model: both precisions sampled and scored
  // by the trainer. f32 differs from the trainer only by kernel rounding; int8 by quantisation on
  // top, so its mismatch must be the larger, and both must be small next to DPPO's δ.
  const fs::path mm = dir / "mismatch";
  const std::string mcmd = exe + " experiment mismatch --model " + (dir / "model-sft").string() +
                           " --data " + (dir / "data").string() + " --limit 6 --out " +
                           mm.string() + " > " + out.string() + " 2>&1";
  ASSERT_EQ(std::system(mcmd.c_str()), 0) << mcmd;
  std::ifstream min(mm / "mismatch.json");
  ASSERT_TRUE(min.good());
  const nlohmann::json m = nlohmann::json::parse(min);
  ASSERT_EQ(m["rows"].size(), 2u);
  const nlohmann::json& int8 = m["rows"][0];
  const nlohmann::json& f32 = m["rows"][1];
  EXPECT_EQ(int8["weights"], "int8");
  EXPECT_EQ(f32["weights"], "f32");
  EXPECT_EQ(int8["episodes"], 6);
  EXPECT_GT(int8["tokens"].get<double>(), 0);
  EXPECT_GT(f32["tokens"].get<double>(), 0);
  EXPECT_LT(f32["tv_mean"].get<double>(), 1e-3);
  EXPECT_GT(int8["tv_mean"].get<double>(), f32["tv_mean"].get<double>());
  EXPECT_LT(int8["tv_mean"].get<double>(), 0.15);
  EXPECT_TRUE(fs::exists(mm / "mismatch.md"));
  fs::remove_all(dir);
  fs::remove(summary);
  fs::remove(out);
}

}  // namespace
