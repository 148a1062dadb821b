// `stoa experiment mismatch`: the behaviour/target mismatch DPPO has to absorb from the workers'
// precision (issue 8's int8-vs-f32 ablation, without staleness). The same model samples episodes
// twice — with the worker's int8 weights and with f32 weights, same questions, same seeds — and the
// trainer's f32 libtorch policy scores every sampled token. Reported per precision: binary TV and
// KL of the sampled tokens, and the fraction the Binary-TV (δ 0.15) and Binary-KL (δ 0.05) trust
// regions would mask for a positive and a negative advantage. The f32 row is the floor set by two
// different f32 implementations (the engine's kernels vs libtorch); the int8 row adds quantisation.
#include "app/experiments/mismatch.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "app/demo/demo_rl.h"
#include "core/error.h"
#include "core/jsonl.h"
#include "core/process_run.h"
#include "model/weights.h"
#include "train/mismatch.h"
#include "train/trainer.h"

namespace stoa::app {
namespace {
namespace fs = std::filesystem;

struct Row {
  std::string weights;
  int64_t episodes = 0;
  double reward_mean = 0;
  train::MismatchStats stats;
};

Row score(const std::string& rollouts_path, const std::string& weights, train::Trainer& trainer) {
  train::LossConfig tv, kl;
  tv.kind = train::LossKind::kDppoBinaryTv;
  kl.kind = train::LossKind::kDppoBinaryKl;
  kl.delta_hi = kl.delta_lo = train::kDppoKlDelta;
  train::MismatchAccumulator acc(tv, kl);
  Row row;
  row.weights = weights;
  STOA_CHECK(fs::exists(rollouts_path), ErrorKind::kNotFound, "mismatch: ", rollouts_path,
             " was not written");
  double reward = 0;
  read_jsonl(rollouts_path, BadLinePolicy::kFatal, [&](const nlohmann::json& r, int64_t) {
    const auto tokens = r.at("tokens").get<std::vector<int32_t>>();
    const auto mask = r.at("mask").get<std::vector<uint8_t>>();
    const auto mu = r.at("mu_logprobs").get<std::vector<float>>();
    STOA_CHECK(tokens.size() == mask.size() && tokens.size() == mu.size(), ErrorKind::kBadFormat,
               "mismatch: ", rollouts_path, ": episode ", r.value("id", std::string("?")), " has ",
               tokens.size(), " tokens, ", mask.size(), " mask entries and ", mu.size(),
               " log-probs");
    const std::vector<float> logp = trainer.token_logprobs(tokens);
    for (size_t t = 1; t < tokens.size(); ++t) {
      if (mask[t]) acc.add(logp[t], mu[t]);
    }
    reward += r.value("reward", 0.0);
    row.episodes++;
  });
  STOA_CHECK(row.episodes > 0, ErrorKind::kBadFormat, "mismatch: ", rollouts_path,
             " holds no episodes");
  row.reward_mean = reward / static_cast<double>(row.episodes);
  row.stats = acc.finish();
  return row;
}

nlohmann::json to_json(const Row& r) {
  const train::MismatchStats& s = r.stats;
  return {{"weights", r.weights},
          {"episodes", r.episodes},
          {"reward_mean", r.reward_mean},
          {"tokens", s.tokens},
          {"tv_mean", s.tv_mean},
          {"tv_p99", s.tv_p99},
          {"tv_max", s.tv_max},
          {"kl_mean", s.kl_mean},
          {"kl_p99", s.kl_p99},
          {"kl_max", s.kl_max},
          {"log_ppl_diff", s.log_ppl_diff},
          {"masked_tv_if_positive", s.masked_tv_if_positive},
          {"masked_tv_if_negative", s.masked_tv_if_negative},
          {"masked_kl_if_positive", s.masked_kl_if_positive},
          {"masked_kl_if_negative", s.masked_kl_if_negative}};
}

std::string markdown(const std::vector<Row>& rows) {
  std::ostringstream m;
  m << "| worker weights | episodes | sampled tokens | TV mean | TV p99 | TV max | KL mean | KL "
       "p99 "
       "| masked Binary-TV (A>0 / A<0) | masked Binary-KL (A>0 / A<0) |\n"
       "|---|---|---|---|---|---|---|---|---|---|\n";
  char buf[512];
  for (const Row& r : rows) {
    const train::MismatchStats& s = r.stats;
    std::snprintf(buf, sizeof buf,
                  "| %s | %lld | %lld | %.3g | %.3g | %.3g | %.3g | %.3g | %.3f%% / %.3f%% | "
                  "%.3f%% / %.3f%% |\n",
                  r.weights.c_str(), static_cast<long long>(r.episodes),
                  static_cast<long long>(s.tokens), s.tv_mean, s.tv_p99, s.tv_max, s.kl_mean,
                  s.kl_p99, 100 * s.masked_tv_if_positive, 100 * s.masked_tv_if_negative,
                  100 * s.masked_kl_if_positive, 100 * s.masked_kl_if_negative);
    m << buf;
  }
  return m.str();
}

}  // namespace

int run_mismatch(const MismatchOptions& o) {
  STOA_CHECK(o.limit >= 1, ErrorKind::kInvalidArgument, "mismatch: --limit must be >= 1");
  STOA_CHECK(o.temperature > 0, ErrorKind::kInvalidArgument,
             "mismatch: --temperature must be > 0 (greedy decoding has no behaviour log-probs)");
  fs::create_directories(o.out);
  std::vector<Row> rows;
  ModelWeights weights = load_model_dir(o.model);
  train::TrainOptions topt;
  topt.threads = o.threads;
  topt.temperature = o.temperature;  // π at the temperature the rollouts were sampled at
  train::Trainer trainer(weights, topt);
  weights = ModelWeights();
  for (const std::string precision : {"int8", "f32"}) {
    const std::string rollouts = o.out + "/rollouts-" + precision + ".jsonl";
    EvalRun run;
    run.model = o.model;
    run.data = o.data;
    run.index = o.index;
    run.split = o.split;
    run.limit = o.limit;
    run.int8 = precision == "int8";
    run.temperature = o.temperature;
    run.seed = o.seed;
    run.episode = o.episode;
    run.json_out = o.out + "/eval-" + precision + ".json";
    run.rollouts = rollouts;
    std::fprintf(stderr, "[mismatch] sampling %lld episodes with %s weights\n",
                 static_cast<long long>(o.limit), precision.c_str());
    run_child_or_throw(eval_command(run), o.out + "/eval-" + precision + ".log",
                       "stoa eval (" + precision + ")");
    rows.push_back(score(rollouts, precision, trainer));
  }
  nlohmann::json j = {{"model", o.model},
                      {"split", o.split},
                      {"temperature", o.temperature},
                      {"seed", o.seed},
                      {"delta_tv", train::kDppoTvDelta},
                      {"delta_kl", train::kDppoKlDelta},
                      {"rows", nlohmann::json::array()}};
  for (const Row& r : rows) j["rows"].push_back(to_json(r));
  const std::string table = markdown(rows);
  std::ofstream(o.out + "/mismatch.json") << j.dump(2) << '\n';
  std::ofstream(o.out + "/mismatch.md") << table;
  std::printf("%s\n%s", j.dump(2).c_str(), table.c_str());
  return 0;
}

}  // namespace stoa::app
