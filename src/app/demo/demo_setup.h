// The offline preparation half of `stoa demo`: everything before reinforcement learning starts.
// Each stage writes into the demo directory and leaves a `<stage>.done` stamp holding the
// parameters it ran with; a rerun with the same parameters reuses the stage (so tuning the RL
// half does not redo the SFT), a change of any parameter redoes it and every stage after it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace stoa::app {

struct DemoSetupOptions {
  std::string dir;              // the demo directory
  uint64_t seed = 1;            // data, model init and SFT order
  int papers = 20000;           // PaperSearchQA-mini corpus size
  int questions = 10000;        // over all splits
  std::string preset = "demo";  // model shape (model/presets.cpp); vocab comes from the tokenizer
  int64_t vocab_size = 4096;    // BPE vocabulary (bytes + merges + special + task tags)
  int64_t sft_examples = 1000;  // scripted demonstrations (train split only)
  // Add env/tasks/search/copy_curriculum.h's short copy examples (two per train question) to the
  // SFT data: what taught the `demo` model to copy at all (docs/results.md), at ~3x the SFT tokens.
  bool copy_curriculum = false;
  int sft_epochs = 2;
  // > 0: stop the SFT at the first snapshot (every sft_snapshot_every steps) whose greedy pass@1
  // on sft_probe_questions held-out train questions reaches this (sft_to_target.h); the
  // warm start then starts RL at roughly this pass@1 instead of wherever the epochs end.
  double sft_target_pass1 = 0;
  int64_t sft_probe_questions = 200;
  int64_t sft_snapshot_every = 200;
  double sft_lr = 2e-3;
  int64_t sft_batch_tokens = 8192;
  int max_observation_tokens = 256;  // the episode budget for one <information> block
  // Trainer threads during SFT. One: on this 1.76M-parameter model a second thread hardly helps
  // (2048-token batches on the 2-core machine: 2.2 steps/s with one, 2.33 with two; before the
  // trainer also held OpenBLAS to this count, "two" meant four spinning threads and 1.1 steps/s).
  int threads = 1;
  // A warm-start directory (warm_start.h) that replaces model init, demonstrations and SFT when
  // it fits this demo's data and tokenizer; empty: always train the warm start here.
  std::string warm_start;
  // When the warm start does not fit: true throws (the user asked for that one), false says why and
  // trains the warm start here instead.
  bool warm_start_required = false;
};

struct DemoSetupResult {
  std::string warm_start;  // the warm-start directory used, or empty when the SFT ran here
};

// `--full`'s warm start (shared by `stoa demo --full` and `stoa experiment ablations --full`, so
// the ablations reuse the demo's SFT): 4000 demonstrations plus the copy curriculum in batches of
// 2048 tokens over a 3-epoch cosine schedule, stopped at held-out pass@1 0.28 — the setting under
// which the `demo` model learned to copy (docs/results.md), aimed at the 25–35 % band.
void apply_full_setup(DemoSetupOptions* options);

// Paths inside the demo directory.
struct DemoPaths {
  std::string data, index, tokenizer, model0, sft_data, sft_model, logs, run;
  std::string probe;  // held-out train questions (only with an SFT target)
  explicit DemoPaths(const std::string& dir);
};

// Runs (or reuses) data → index → tokenizer → model init → demonstrations → SFT, or with a
// fitting warm start data → index → tokenizer → warm start. `say` prints a progress line. Throws
// stoa::Error naming the stage that failed and the end of its log. A model the SFT trained here
// gets a provenance.json, so its directory can serve as a later demo's warm start.
DemoSetupResult prepare_demo(const DemoSetupOptions& options,
                             const std::function<void(const std::string&)>& say);

// Copies tokenizer.json and tokenizer_config.json from one model directory to another (a trained
// model directory holds only config.json + safetensors).
void copy_tokenizer(const std::string& from_dir, const std::string& to_dir);

}  // namespace stoa::app
