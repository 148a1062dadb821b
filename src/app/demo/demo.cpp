// `stoa demo`: the project's main job, offline on one machine. Builds PaperSearchQA-mini, its BM25
// index, a tokenizer and a small model, warm-starts the model by SFT on scripted demonstrations
// (demo_setup.h), measures pass@1 on the validation split, then runs asynchronous RL the way a
// real deployment does — `stoa run` (hub + DPPO trainer) and N `stoa work` processes talking
// HTTP on loopback, int8 weights synced by PULSE (demo_rl.h) — and measures pass@1 again.
// Progress is printed while it runs; the summary is printed as JSON (and to --json-summary).
#include "app/demo/demo.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/demo/demo_report.h"
#include "app/demo/demo_rl.h"
#include "app/demo/demo_setup.h"
#include "app/demo/worker_targets.h"
#include "core/error.h"
#include "core/source_root.h"
#include "model/arch_registry.h"
#include "model/weights.h"
#include "pulse/model_view.h"

namespace stoa::app {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_interrupted{false};
void on_interrupt(int) {
  g_interrupted = true;
}

// The warm start committed with the sources (assets/warm-start, app/demo/warm_start.h): the SFT
// model of a measured `stoa demo --full` run, so the default demo spends its minutes on RL. An
// installed `stoa` package has no checkout: it ships the same files under the data directory.
std::string committed_warm_start() {
  const fs::path beside_sources = source_root() / "assets" / "warm-start";
  if (fs::exists(beside_sources)) return beside_sources.string();
  return (fs::path(STOA_INSTALL_DATADIR) / "warm-start").string();
}

void say(const std::string& line) {
  std::printf("[demo] %s\n", line.c_str());
  std::fflush(stdout);
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

int run_demo(DemoOptions o) {
  if (o.full) {
    // The SFT takes ~31 min and the five evaluations ~2.5 min, so 24 RL minutes still fit the hour
    // (≈ 57 min); from the 36 % warm start 20 RL minutes reached 59.7 % (docs/results.md §00).
    o.rl.minutes = std::max(o.rl.minutes, 24.0);
    apply_full_setup(&o.setup);
    o.eval_limit = 0;
    if (o.warm_start == "auto") o.warm_start = "none";  // --full reproduces the SFT too
  }
  if (o.warm_start == "auto") {
    o.setup.warm_start = committed_warm_start();
    if (!fs::exists(o.setup.warm_start)) o.setup.warm_start.clear();
  } else if (o.warm_start != "none") {
    o.setup.warm_start = o.warm_start;
    o.setup.warm_start_required = true;
  }
  // A kernel target this machine lacks is refused before the setup's minutes, not after them.
  (void)parse_kernel_targets(o.rl.worker_kernel_targets, available_kernel_targets());
  (void)assign_worker_backends(o.rl.worker_backends, 1);
  o.rl.seed = o.setup.seed;
  o.rl.episode.max_observation_tokens = o.setup.max_observation_tokens;
  if (o.fresh) fs::remove_all(o.setup.dir);
  fs::create_directories(o.setup.dir);
  o.setup.dir = fs::canonical(o.setup.dir).string();
  const DemoPaths p(o.setup.dir);
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  const auto t_start = Clock::now();
  say("directory " + o.setup.dir + " (logs in " + p.logs + ")");

  const DemoSetupResult setup = prepare_demo(o.setup, say);
  // Default RL minutes: the whole demo stays within 20 minutes on the 2-core machine — 16 after a
  // warm start (setup + two 400-question evaluations take ~1 min), 8 after the ~7-minute SFT.
  if (o.rl.minutes <= 0) o.rl.minutes = setup.warm_start.empty() ? 8 : 16;
  const ModelWeights sft = load_model_dir(p.sft_model);
  pulse::Int8Quantizer quantizer;
  const int64_t full_int8_bytes =
      static_cast<int64_t>(pulse::int8_view_of(sft, 0, &quantizer).nbytes());
  const double pass1_before = evaluate_pass1(p, p.sft_model, "validation", o.eval_limit,
                                             o.rl.episode, p.logs, "eval-before", say);
  const double setup_seconds = seconds_since(t_start);

  const RlResult rl = run_rl_phase(o.rl, p, p.sft_model, p.run, p.logs, say, g_interrupted);
  const double pass1_after = evaluate_pass1(p, rl.final_model, "validation", o.eval_limit,
                                            o.rl.episode, p.logs, "eval-after", say);

  nlohmann::json s = {{"pass1_before", pass1_before},
                      {"pass1_after", pass1_after},
                      {"eval_split", "validation"},
                      {"eval_questions", o.eval_limit},
                      {"full_int8_bytes", full_int8_bytes},
                      {"model_parameters", count_parameters(sft.config)},
                      {"workers", o.rl.workers},
                      {"warm_start", setup.warm_start},
                      {"setup_seconds", setup_seconds}};
  s.update(rl_summary(o.rl, rl, p.run));
  if (o.full) {  // the test split, once, at the end
    s["pass1_test_before"] =
        evaluate_pass1(p, p.sft_model, "test", 0, o.rl.episode, p.logs, "test-before", say);
    s["pass1_test_after"] =
        evaluate_pass1(p, rl.final_model, "test", 0, o.rl.episode, p.logs, "test-after", say);
  }
  s["total_seconds"] = seconds_since(t_start);
  std::istringstream lines(verification_summary_lines(s));
  for (std::string line; std::getline(lines, line);) say(line);
  say("summary:");
  std::printf("%s\n", s.dump(2).c_str());
  if (!o.json_summary.empty()) {
    std::ofstream f(o.json_summary);
    f << s.dump(2) << '\n';
    STOA_CHECK(f.good(), ErrorKind::kIo, "demo: cannot write ", o.json_summary);
  }
  return 0;
}

}  // namespace stoa::app
