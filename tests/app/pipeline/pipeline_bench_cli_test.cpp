// `stoa bench pipeline` end to end on a tiny model (through core/process, as a user runs it):
// one JSON document whose every run generated every token, whose linked runs carried their bytes
// through the emulating proxies, and whose efficiency is the ratio of the two runs' rates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/process_run.h"
#include "support/stoa_cli.h"

namespace stoa {
namespace {

RunResult stoa_run(std::vector<std::string> args) {
  args.insert(args.begin(), testing::stoa_binary());
  ProcessOptions o;
  o.out = OutputTarget::capture();
  o.err = OutputTarget::capture();
  return run_process(args, o, std::chrono::minutes(5));
}

TEST(PipelineBenchCli, ReportsEveryStageCountConsistently) {
  const RunResult r = stoa_run({"bench", "pipeline", "--preset", "tiny-lfm2", "--stages", "1,2,4",
                                "--sequences", "8", "--micro-batches", "4", "--new-tokens", "6",
                                "--prompt-tokens", "5", "--rtt-ms", "4", "--json"});
  ASSERT_EQ(r.status.code, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  ASSERT_EQ(report["runs"].size(), 3u);
  EXPECT_EQ(report["bench"], "pipeline");
  const int64_t tokens = 8 * 6;
  EXPECT_EQ(report["runs"][0]["whole"]["tokens"], tokens);
  for (size_t i = 1; i < 3; ++i) {
    const nlohmann::json& run = report["runs"][i];
    for (const char* mode : {"direct", "linked"}) {
      EXPECT_EQ(run[mode]["tokens"], tokens) << mode;
      EXPECT_GT(run[mode]["wire_bytes_per_token"].get<double>(), 4.0 * 64) << mode;
    }
    EXPECT_TRUE(run["bit_identical_to_whole"].get<bool>());
    const double ratio =
        run["linked"]["tokens_per_s"].get<double>() / run["direct"]["tokens_per_s"].get<double>();
    EXPECT_DOUBLE_EQ(run["efficiency"].get<double>(), ratio);
    // Each stage holds less than the whole model.
    EXPECT_LT(run["max_stage_weight_bytes"].get<int64_t>(),
              report["whole_weight_bytes"].get<int64_t>());
  }
}

// Stages as `stoa stage` processes, each loading only its layers from the preset's seeded
// weights: the same bits as the bench's own weights, and each process's peak memory measured.
TEST(PipelineBenchCli, StageProcessesGiveTheSameRollouts) {
  const RunResult r = stoa_run({"bench", "pipeline", "--preset", "tiny-lfm2", "--stages", "3",
                                "--sequences", "4", "--micro-batches", "2", "--new-tokens", "5",
                                "--prompt-tokens", "4", "--rtt-ms", "2", "--processes", "--json"});
  ASSERT_EQ(r.status.code, 0) << r.err;
  const nlohmann::json run = nlohmann::json::parse(r.out)["runs"][0];
  EXPECT_TRUE(run["bit_identical_to_whole"].get<bool>());
  ASSERT_EQ(run["linked"]["stage_peak_rss_bytes"].size(), 2u);
  for (const auto& rss : run["linked"]["stage_peak_rss_bytes"]) EXPECT_GT(rss.get<int64_t>(), 0);
}

// Every hop through a relay: the same rollouts, and twice the bytes on the links (each hop is
// two links, one per side of the relay), as the proxies count them.
TEST(PipelineBenchCli, RelayedHopsGiveTheSameRolloutsOverTwiceTheLinks) {
  auto linked_run = [](bool relay) {
    std::vector<std::string> args = {
        "bench",           "pipeline", "--preset",        "tiny-lfm2", "--stages",     "3",
        "--sequences",     "4",        "--micro-batches", "2",         "--new-tokens", "5",
        "--prompt-tokens", "4",        "--rtt-ms",        "2",         "--json"};
    if (relay) args.push_back("--relay");
    const RunResult r = stoa_run(args);
    EXPECT_EQ(r.status.code, 0) << r.err;
    return nlohmann::json::parse(r.out)["runs"][0];
  };
  const nlohmann::json direct = linked_run(false);
  const nlohmann::json relayed = linked_run(true);
  EXPECT_TRUE(relayed["bit_identical_to_whole"].get<bool>());
  const double ratio =
      relayed["linked"]["wire_bytes"].get<double>() / direct["linked"]["wire_bytes"].get<double>();
  EXPECT_GT(ratio, 1.95);  // the relay's join and pairing frames are the few bytes over 2
  EXPECT_LT(ratio, 2.05);
}

TEST(PipelineBenchCli, RefusesMoreMicroBatchesThanSequences) {
  const RunResult r = stoa_run({"bench", "pipeline", "--preset", "tiny-lfm2", "--stages", "2",
                                "--sequences", "2", "--micro-batches", "4"});
  EXPECT_NE(r.status.code, 0);
  EXPECT_NE(r.err.find("micro-batches"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace stoa
