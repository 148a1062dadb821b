// The offline preparation half of `stoa demo`: everything before reinforcement learning starts.
// Each stage writes into the demo directory and leaves a `<stage>.done` stamp holding the
// parameters it ran with; a rerun with the same parameters reuses the stage (so tuning the RL
// half does not redo the SFT), a change of any parameter redoes it and every stage after it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace stoa::cli {

struct DemoSetupOptions {
  std::string dir;              // the demo directory
  uint64_t seed = 1;            // data, model init and SFT order
  int papers = 20000;           // PaperSearchQA-mini corpus size
  int questions = 10000;        // over all splits
  std::string preset = "demo";  // model shape (model/presets.cpp); vocab comes from the tokenizer
  int64_t vocab_size = 4096;    // BPE vocabulary (bytes + merges + special + task tags)
  int64_t sft_examples = 1000;  // scripted demonstrations (train split only)
  // Add env/copy_curriculum.h's short copy examples (two per train question) to the SFT data:
  // what taught the `demo` model to copy at all (docs/results.md), at ~3x the SFT tokens.
  bool copy_curriculum = false;
  int sft_epochs = 2;
  double sft_lr = 2e-3;
  int64_t sft_batch_tokens = 8192;
  int max_observation_tokens = 256;  // the episode budget for one <information> block
  int threads = 2;                   // trainer threads during SFT
};

// Paths inside the demo directory.
struct DemoPaths {
  std::string data, index, tokenizer, model0, sft_data, sft_model, logs, run;
  explicit DemoPaths(const std::string& dir);
};

// Runs (or reuses) data → index → tokenizer → model init → demonstrations → SFT. `say` prints a
// progress line. Throws stoa::Error naming the stage that failed and the end of its log.
void prepare_demo(const DemoSetupOptions& options,
                  const std::function<void(const std::string&)>& say);

// Copies tokenizer.json and tokenizer_config.json from one model directory to another (a trained
// model directory holds only config.json + safetensors).
void copy_tokenizer(const std::string& from_dir, const std::string& to_dir);

}  // namespace stoa::cli
