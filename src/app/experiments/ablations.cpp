// `stoa experiment ablations`: what each mechanism contributes (issue 8). From one SFT warm start
// (the demo's, built or reused by the same stages as `stoa demo`), runs one RL phase per variant
// with the same seeds and wall-clock budget, evaluates each, and writes a table.
// - loss: dppo-binary-tv (the default), dppo-binary-kl, ppo-clip, truncated-is (no trust region);
// - staleness bound: 0 (synchronous), 2 (the default), 4;
// - sync: PULSE patches (the default) vs full int8 weights every version (anchor_every 1);
// - int8 vs f32 worker weights: the precision mismatch alone (`stoa experiment mismatch`).
// Every variant's run directory keeps its step log, so `stoa plot --run ...` draws them together.
#include "app/experiments/ablations.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/demo/demo_report.h"
#include "app/demo/demo_rl.h"
#include "app/demo/demo_setup.h"
#include "core/error.h"
#include "core/process_run.h"
#include "train/loss_config.h"

namespace stoa::app {
namespace {
namespace fs = std::filesystem;

std::atomic<bool> g_interrupted{false};
void on_interrupt(int) {
  g_interrupted = true;
}

struct Variant {
  std::string name;
  std::string group;  // which comparison it belongs to
  std::function<void(RlOptions&)> apply;
};

std::vector<Variant> all_variants() {
  return {
      {"dppo-binary-tv", "loss,staleness,sync", [](RlOptions&) {}},
      {"dppo-binary-kl", "loss",
       [](RlOptions& o) {
         o.loss = "dppo-binary-kl";
         o.delta = train::kDppoKlDelta;  // the KL scale, not TV's
       }},
      {"ppo-clip", "loss", [](RlOptions& o) { o.loss = "ppo-clip"; }},
      {"truncated-is", "loss",
       [](RlOptions& o) {
         o.loss = "truncated-is";
         o.ratio_cap = 10;  // no trust region, ratios truncated at C = 10 (3-20 are common)
       }},
      {"staleness-0", "staleness", [](RlOptions& o) { o.max_staleness = 0; }},
      {"staleness-4", "staleness", [](RlOptions& o) { o.max_staleness = 4; }},
      {"full-sync", "sync",
       [](RlOptions& o) {
         o.anchor_every = 1;
         o.keep_anchors = 1;
       }},
  };
}

void say(const std::string& line) {
  std::printf("[ablations] %s\n", line.c_str());
  std::fflush(stdout);
}

std::string markdown_table(const nlohmann::json& rows, double pass1_before) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o << "| variant | pass@1 after (before " << pass1_before
    << ") | reward first→last quarter | s to reward " << kRewardLevel
    << " | masked | TV | TV first→last quarter | KL | steps | dropped stale | busy | "
       "bytes per version shipped |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  auto number = [](const nlohmann::json& r, const char* key) { return r.value(key, 0.0); };
  for (const auto& r : rows) {
    o.precision(3);
    o << "| " << r["variant"].get<std::string>() << " | " << r["pass1_after"].get<double>() << " | "
      << r["reward_first_quarter"].get<double>() << " → " << r["reward_last_quarter"].get<double>()
      << " | ";
    o.precision(0);
    const double mark = r.value("seconds_to_reward_level", -1.0);
    if (mark < 0)
      o << "not reached";
    else
      o << mark;
    o << " | ";
    o.precision(4);
    o << 100 * r["dppo_masked_fraction"].get<double>() << "% | " << r["tv_mean"].get<double>()
      << " | " << number(r, "tv_first_quarter") << " → " << number(r, "tv_last_quarter") << " | "
      << r["kl_mean"].get<double>() << " | ";
    o.precision(0);
    o << r["steps"].get<double>() << " | " << r["rollouts_dropped_stale"].get<double>() << " | ";
    o.precision(2);
    o << r["trainer_busy_fraction"].get<double>() << " | ";
    o.precision(0);
    o << r.value("sync_bytes_per_version", r.value("patch_bytes_mean", 0.0)) << " |\n";
  }
  return o.str();
}

// What a results file must share with this run for its rows to stand beside this run's: the
// same warm start (the SFT stage's stamp) and the same budget.
nlohmann::json comparability_key(const AblationsOptions& o) {
  std::ifstream stamp(o.setup.dir + "/sft.done");
  return {{"warm_start", nlohmann::json::parse(stamp, nullptr, false)},
          {"minutes_per_run", o.rl.minutes},
          {"workers", o.rl.workers},
          {"eval_questions", o.eval_limit}};
}

}  // namespace

int run_ablations(AblationsOptions o) {
  if (o.full_setup) apply_full_setup(&o.setup);
  o.rl.seed = o.setup.seed;
  o.rl.episode.max_observation_tokens = o.setup.max_observation_tokens;
  fs::create_directories(o.setup.dir);
  o.setup.dir = fs::canonical(o.setup.dir).string();
  const DemoPaths p(o.setup.dir);
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  prepare_demo(o.setup, say);
  const std::string root = o.setup.dir + "/ablations";
  fs::create_directories(root);
  const double before = evaluate_pass1(p, p.sft_model, "validation", o.eval_limit, o.rl.episode,
                                       root, "eval-sft", say);
  const nlohmann::json key = comparability_key(o);
  const nlohmann::json earlier = read_comparable_results(root + "/ablations.json", key);
  const nlohmann::json earlier_precision =
      earlier.is_null() ? nlohmann::json() : earlier.value("int8_vs_f32", nlohmann::json());
  std::map<std::string, nlohmann::json> by_variant;
  if (!earlier.is_null()) {
    for (const auto& r : earlier.value("runs", nlohmann::json::array()))
      by_variant[r.at("variant").get<std::string>()] = r;
    say("keeping " + std::to_string(by_variant.size()) + " earlier variant result(s) from " + root +
        "/ablations.json (same warm start and budget)");
  }
  auto ordered_rows = [&] {
    nlohmann::json rows = nlohmann::json::array();
    for (const Variant& v : all_variants()) {
      auto it = by_variant.find(v.name);
      if (it != by_variant.end()) rows.push_back(it->second);
    }
    return rows;
  };
  for (const Variant& v : all_variants()) {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), v.name) == o.only.end())
      continue;
    if (g_interrupted) break;
    RlOptions rl = o.rl;
    v.apply(rl);
    const std::string dir = root + "/" + v.name;
    say(v.name + ": " + std::to_string(rl.minutes) + " minutes of RL (loss " + rl.loss +
        ", staleness " + std::to_string(rl.max_staleness) + ", anchor every " +
        std::to_string(rl.anchor_every) + ")");
    const RlResult r = run_rl_phase(rl, p, p.sft_model, dir + "/run", dir, say, g_interrupted);
    nlohmann::json row = rl_summary(rl, r, dir + "/run");
    row["variant"] = v.name;
    row["compares"] = v.group;
    row["pass1_after"] = evaluate_pass1(p, r.final_model, "validation", o.eval_limit, rl.episode,
                                        dir, "eval-after", say);
    by_variant[v.name] = row;
    std::ofstream(root + "/ablations.json") << nlohmann::json{
        {"pass1_before", before},
        {"comparability", key},
        {"runs", ordered_rows()},
        {"int8_vs_f32", earlier_precision}}.dump(2);
  }
  const nlohmann::json rows = ordered_rows();
  // int8 vs f32 workers: the precision mismatch DPPO absorbs, from the same SFT model
  // (`stoa experiment mismatch`: both precisions sampled, every token scored by the trainer).
  nlohmann::json precision = earlier_precision;
  std::string precision_table;
  const bool want_precision =
      o.only.empty() || std::find(o.only.begin(), o.only.end(), "int8-vs-f32") != o.only.end();
  if (want_precision && !g_interrupted) {
    say("int8-vs-f32: sampling with both precisions, scoring with the trainer");
    const std::string mm = root + "/int8-vs-f32";
    run_child_or_throw({self_executable(),
                        "experiment",
                        "mismatch",
                        "--model",
                        p.sft_model,
                        "--data",
                        p.data,
                        "--index",
                        p.index,
                        "--limit",
                        std::to_string(o.mismatch_episodes),
                        "--seed",
                        std::to_string(o.setup.seed),
                        "--max-turns",
                        std::to_string(o.rl.episode.max_turns),
                        "--max-new-tokens",
                        std::to_string(o.rl.episode.max_new_tokens),
                        "--max-observation-tokens",
                        std::to_string(o.rl.episode.max_observation_tokens),
                        "--out",
                        mm},
                       root + "/int8-vs-f32.log", "stoa experiment mismatch");
    std::ifstream pj(mm + "/mismatch.json");
    precision = nlohmann::json::parse(pj);
  }
  if (!precision.is_null()) {
    std::ifstream pm(root + "/int8-vs-f32/mismatch.md");
    precision_table.assign(std::istreambuf_iterator<char>(pm), {});
  }
  const nlohmann::json out = {{"pass1_before", before},         {"comparability", key},
                              {"eval_questions", o.eval_limit}, {"minutes_per_run", o.rl.minutes},
                              {"workers", o.rl.workers},        {"runs", rows},
                              {"int8_vs_f32", precision}};
  std::ofstream(root + "/ablations.json") << out.dump(2) << '\n';
  std::string table = rows.empty() ? std::string() : markdown_table(rows, before);
  if (!precision_table.empty())
    table += "\nint8 vs f32 worker weights (no staleness):\n\n" + precision_table;
  std::ofstream(root + "/ablations.md") << table;
  std::printf("%s\n%s", out.dump(2).c_str(), table.c_str());
  if (!o.json_out.empty()) std::ofstream(o.json_out) << out.dump(2) << '\n';
  say("run directories under " + root + "; plot them with `stoa plot --run " + root +
      "/<variant>/run ...`");
  return 0;
}

}  // namespace stoa::app
