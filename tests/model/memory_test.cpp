// Peak resident memory of the streaming model commands, measured on the `stoa` binary as a child
// process (its VmHWM from wait4): init, import (safetensors -> GGUF, GGUF -> safetensors) and
// export hold one tensor's wide copy at a time, so their peak above the binary's own baseline
// is a small fraction of the file they write. The model is LFM2-350M's shape cut to 6 layers
// and an 8192-token vocabulary (~117M parameters: every tensor of a layer at full size), so the
// test stays a few seconds; before streaming, init and export peaked at 3-6x the file size.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/process_run.h"
#include "model/arch_registry.h"
#include "model/config.h"
#include "model/presets.h"
#include "model/weights.h"
#include "support/file_text.h"
#include "support/sanitizer.h"
#include "support/temp_dir.h"

namespace stoa {
namespace {

std::string stoa_binary() {
  const char* binary = std::getenv("STOA_BINARY");
  EXPECT_NE(binary, nullptr) << "STOA_BINARY is not set (run through ctest)";
  return binary ? binary : "stoa";
}

struct Measured {
  int64_t peak_rss = 0;
  std::string output;
};

Measured run_stoa(std::vector<std::string> args) {
  args.insert(args.begin(), stoa_binary());
  ProcessOptions options;
  options.out = OutputTarget::capture();
  options.err = OutputTarget::same_as_stdout();
  RunResult r = run_process(args, options, std::chrono::minutes(5));
  EXPECT_EQ(r.status.code, 0) << r.out;
  return {r.peak_rss_bytes, r.out};
}

ModelConfig cut_lfm2_350m() {
  ModelConfig c = preset_config("lfm2-350m");
  c.vocab_size = 8192;
  c.num_layers = 6;
  c.layer_kinds.resize(6);  // LFM2-350M's first six: conv conv attn conv conv attn
  validate_model_config(c, "cut lfm2-350m");
  return c;
}

int64_t file_bytes(const std::string& path) {
  return static_cast<int64_t>(std::filesystem::file_size(path));
}

// What a streaming command may hold above the binary's baseline: a fraction of the file it
// writes (one tensor here is at most ~4% of the model) plus allocator slack.
constexpr double kMaxFractionOfFile = 0.25;
constexpr int64_t kSlackBytes = 48ll << 20;

class StreamingMemory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir("memory");
    std::ofstream(dir_->file("config.json"))
        << model_config_to_json(cut_lfm2_350m()).dump(2) << "\n";
    // The binary doing (almost) nothing: libraries, static state (libtorch in the full build).
    baseline_ = run_stoa({"model", "init", "--list"}).peak_rss;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static void expect_small_peak(const char* what, int64_t peak, int64_t written) {
    int64_t above = peak - baseline_;
    std::printf("%s: peak %.1f MB (baseline %.1f MB, +%.1f MB), wrote %.1f MB: %.3fx\n", what,
                peak / 1e6, baseline_ / 1e6, above / 1e6, written / 1e6,
                static_cast<double>(above) / static_cast<double>(written));
    EXPECT_LE(above,
              static_cast<int64_t>(kMaxFractionOfFile * static_cast<double>(written)) + kSlackBytes)
        << what << ": peak RSS " << peak << " B, baseline " << baseline_ << " B, file " << written
        << " B";
  }
  static testing::TempDir* dir_;
  static int64_t baseline_;
};
testing::TempDir* StreamingMemory::dir_ = nullptr;
int64_t StreamingMemory::baseline_ = 0;

TEST_F(StreamingMemory, InitImportExportHoldOneTensorAtATime) {
  if (stoa::testing::kSanitizerShadowsMemory)
    GTEST_SKIP() << stoa::testing::kNoMemoryBoundsUnderSanitizer;
  ASSERT_GT(baseline_, 0);
  // Random init straight to bf16 safetensors (f32 masters never exist).
  Measured init = run_stoa({"model", "init", "--config", dir_->file("config.json"), "--seed", "3",
                            "--dtype", "bf16", "--out", dir_->file("bf16")});
  int64_t bf16_bytes = file_bytes(dir_->file("bf16/model.safetensors"));
  expect_small_peak("init bf16", init.peak_rss, bf16_bytes);

  // Import safetensors -> Q8_0 GGUF.
  Measured exported = run_stoa({"model", "export-gguf", "--model", dir_->file("bf16"), "--type",
                                "q8_0", "--out", dir_->file("m.q8_0.gguf")});
  int64_t q8_bytes = file_bytes(dir_->file("m.q8_0.gguf"));
  expect_small_peak("export q8_0 from bf16 dir", exported.peak_rss, q8_bytes);

  // Import GGUF Q8_0 -> bf16 safetensors.
  Measured imported = run_stoa({"model", "import-gguf", dir_->file("m.q8_0.gguf"), "--dtype",
                                "bf16", "--out", dir_->file("from_gguf")});
  expect_small_peak("import q8_0 gguf to bf16", imported.peak_rss,
                    file_bytes(dir_->file("from_gguf/model.safetensors")));

  // Int8 all the way: random init to an int8-sized directory, re-exported as Q8_0: the blocks
  // pass through unchanged.
  Measured init_q8 = run_stoa({"model", "init", "--config", dir_->file("config.json"), "--seed",
                               "3", "--dtype", "q8_0", "--out", dir_->file("q8")});
  int64_t q8_dir_bytes = file_bytes(dir_->file("q8/model.gguf"));
  expect_small_peak("init q8_0", init_q8.peak_rss, q8_dir_bytes);
  Measured again = run_stoa({"model", "export-gguf", "--model", dir_->file("q8"), "--type", "q8_0",
                             "--out", dir_->file("again.gguf")});
  expect_small_peak("re-export q8_0", again.peak_rss, q8_dir_bytes);
  const std::string bytes_a = testing::read_text(dir_->file("q8/model.gguf"));
  const std::string bytes_b = testing::read_text(dir_->file("again.gguf"));
  // general.name differs (preset vs path): compare the tensor data, which sits at the end.
  ASSERT_GT(bytes_a.size(), 1000u);
  EXPECT_EQ(bytes_a.substr(bytes_a.size() - (q8_bytes / 2)),
            bytes_b.substr(bytes_b.size() - (q8_bytes / 2)));
}

}  // namespace
}  // namespace stoa
