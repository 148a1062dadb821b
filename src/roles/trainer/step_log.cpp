#include "roles/trainer/step_log.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/jsonl.h"

namespace stoa::trainer {
namespace {

using nlohmann::json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr size_t kMaxWarnings = 8;  // per log: enough to see the pattern, not a flood

// A count: 0 when absent or not a number.
int64_t count(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  return it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(it->get<double>());
}

double or0(double x) {
  return std::isnan(x) ? 0.0 : x;
}

}  // namespace

double json_metric(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return kNaN;
  return it->get<double>();
}

void to_json(json& j, const StepRecord& r) {
  json hist = json::object();
  for (const auto& [behind, groups] : r.staleness_histogram) hist[std::to_string(behind)] = groups;
  j = {{"step", r.step},
       {"version", r.version},
       {"trainer_step", r.trainer_step},
       {"groups", r.groups},
       {"groups_dropped_stale", r.groups_dropped_stale},
       {"groups_uniform", r.groups_uniform},
       {"staleness_histogram", hist},
       {"reward_mean", r.reward_mean},
       {"loss", r.loss},
       {"lr", r.lr},
       {"sequences", r.sequences},
       {"tokens", r.tokens},
       {"tokens_total", r.tokens_total},
       {"masked_fraction", r.masked_fraction},
       {"masked_fraction_pos", r.masked_fraction_pos},
       {"masked_fraction_neg", r.masked_fraction_neg},
       {"tv_mean", r.tv_mean},
       {"tv_max", r.tv_max},
       {"kl_mean", r.kl_mean},
       {"kl_max", r.kl_max},
       {"entropy", r.entropy},
       {"grad_norm", r.grad_norm},
       {"step_seconds", r.step_seconds},
       {"busy_fraction", r.busy_fraction},
       {"patch_bytes", r.patch_bytes},
       {"anchor_bytes", r.anchor_bytes},
       {"elapsed_s", r.elapsed_s}};
  if (r.unix_ms) j["unix_ms"] = *r.unix_ms;
}

std::optional<StepRecord> step_record_from_json(const json& j, std::string* why) {
  if (j.is_discarded() || !j.is_object()) {
    *why = "not a JSON object";
    return std::nullopt;
  }
  auto step = j.find("step");
  if (step == j.end() || !step->is_number_integer()) {
    *why = "no integer \"step\"";
    return std::nullopt;
  }
  StepRecord r;
  r.step = step->get<int64_t>();
  if (auto v = j.find("version"); v != j.end() && v->is_number_integer())
    r.version = v->get<int64_t>();
  r.trainer_step = count(j, "trainer_step");
  r.groups = count(j, "groups");
  r.groups_dropped_stale = count(j, "groups_dropped_stale");
  r.groups_uniform = count(j, "groups_uniform");
  r.reward_mean = json_metric(j, "reward_mean");
  r.loss = json_metric(j, "loss");
  r.lr = json_metric(j, "lr");
  r.sequences = count(j, "sequences");
  r.tokens = count(j, "tokens");
  r.tokens_total = count(j, "tokens_total");
  r.masked_fraction = json_metric(j, "masked_fraction");
  r.masked_fraction_pos = json_metric(j, "masked_fraction_pos");
  r.masked_fraction_neg = json_metric(j, "masked_fraction_neg");
  r.tv_mean = json_metric(j, "tv_mean");
  r.tv_max = json_metric(j, "tv_max");
  r.kl_mean = json_metric(j, "kl_mean");
  r.kl_max = json_metric(j, "kl_max");
  r.entropy = json_metric(j, "entropy");
  r.grad_norm = json_metric(j, "grad_norm");
  r.step_seconds = json_metric(j, "step_seconds");
  r.busy_fraction = json_metric(j, "busy_fraction");
  r.patch_bytes = count(j, "patch_bytes");
  r.anchor_bytes = count(j, "anchor_bytes");
  r.elapsed_s = json_metric(j, "elapsed_s");
  if (auto u = j.find("unix_ms"); u != j.end() && u->is_number())
    r.unix_ms = u->is_number_integer() ? u->get<int64_t>() : std::llround(u->get<double>());
  if (auto h = j.find("staleness_histogram"); h != j.end() && h->is_object()) {
    for (const auto& [k, v] : h->items()) {
      // Keys are the versions behind as decimal strings ("0", "1", ...).
      char* end = nullptr;
      const long long behind = std::strtoll(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || behind < 0 || !v.is_number_integer()) {
        *why = cat("bad staleness_histogram entry \"", k, "\"");
        return std::nullopt;
      }
      r.staleness_histogram[behind] += v.get<int64_t>();
    }
  }
  return r;
}

void from_json(const json& j, StepRecord& r) {
  std::string why;
  auto parsed = step_record_from_json(j, &why);
  if (!parsed) fail(ErrorKind::kBadFormat, "step log line: ", why);
  r = std::move(*parsed);
}

double step_wall_seconds(const StepRecord& r) {
  const double compute = or0(r.step_seconds);
  // busy_fraction = compute / (gather + compute), so compute / busy is the step's wall time.
  return r.busy_fraction > 0 ? compute / r.busy_fraction : compute;
}

StepSummary summarize_steps(const std::vector<StepRecord>& records) {
  StepSummary s;
  s.steps = static_cast<int64_t>(records.size());
  double masked = 0, tv = 0, kl = 0, patch_sum = 0, anchor_sum = 0;
  for (const auto& r : records) {
    const double t = static_cast<double>(r.tokens);
    s.tokens_trained += t;
    masked += t * or0(r.masked_fraction);
    tv += t * or0(r.tv_mean);
    kl += t * or0(r.kl_mean);
    s.compute_seconds += or0(r.step_seconds);
    s.wall_seconds += step_wall_seconds(r);
    s.groups_dropped_stale += r.groups_dropped_stale;
    s.groups_uniform += r.groups_uniform;
    if (r.patch_bytes > 0) {
      patch_sum += static_cast<double>(r.patch_bytes);
      ++s.patches;
    }
    if (r.anchor_bytes > 0) {
      anchor_sum += static_cast<double>(r.anchor_bytes);
      ++s.anchors;
    }
    s.last_version = std::max(s.last_version, r.version);
  }
  if (s.tokens_trained > 0) {
    s.masked_fraction = masked / s.tokens_trained;
    s.tv_mean = tv / s.tokens_trained;
    s.kl_mean = kl / s.tokens_trained;
  }
  if (s.steps > 0) s.step_seconds_mean = s.compute_seconds / static_cast<double>(s.steps);
  if (s.wall_seconds > 0) s.busy_fraction = s.compute_seconds / s.wall_seconds;
  if (s.patches > 0) s.patch_bytes_mean = patch_sum / static_cast<double>(s.patches);
  if (s.anchors > 0) s.anchor_bytes_mean = anchor_sum / static_cast<double>(s.anchors);

  // Mean of a per-step metric over the first or last quarter of the steps.
  auto quarter_mean = [&](double StepRecord::*field, bool last) {
    if (records.empty()) return kNaN;
    const size_t q = std::max<size_t>(1, records.size() / 4);
    double sum = 0;
    for (size_t i = 0; i < q; ++i) sum += or0(records[last ? records.size() - 1 - i : i].*field);
    return sum / static_cast<double>(q);
  };
  s.reward_first_quarter = quarter_mean(&StepRecord::reward_mean, false);
  s.reward_last_quarter = quarter_mean(&StepRecord::reward_mean, true);
  s.tv_first_quarter = quarter_mean(&StepRecord::tv_mean, false);
  s.tv_last_quarter = quarter_mean(&StepRecord::tv_mean, true);

  // Wall clock (the trainer's elapsed_s) at which the mean training reward of the last
  // kRewardWindow steps first reached kRewardLevel. The ablations compare how fast each variant
  // learns with it (pass@1 is measured only at the end).
  double window_sum = 0;
  for (size_t i = 0; i < records.size() && s.seconds_to_reward_level < 0; ++i) {
    window_sum += or0(records[i].reward_mean);
    if (i >= kRewardWindow) window_sum -= or0(records[i - kRewardWindow].reward_mean);
    if (i + 1 >= kRewardWindow && window_sum / kRewardWindow >= kRewardLevel)
      s.seconds_to_reward_level = or0(records[i].elapsed_s);
  }
  return s;
}

namespace {

StepLog read_lines(JsonlReader& reader) {
  StepLog log;
  while (auto line = reader.next()) {
    ++log.lines;
    std::string why;
    if (auto r = step_record_from_json(line->value, &why)) {
      log.records.push_back(std::move(*r));
      continue;
    }
    ++log.skipped;
    if (log.warnings.size() < kMaxWarnings)
      log.warnings.push_back(cat(reader.source(), ":", line->number, ": ", why, "; skipped"));
  }
  return log;
}

}  // namespace

StepLog read_step_log(const std::string& path, bool missing_ok) {
  if (missing_ok && !std::filesystem::exists(path)) return {};
  STOA_CHECK(std::filesystem::exists(path), ErrorKind::kNotFound, "no step log at ", path);
  JsonlReader reader = JsonlReader::open(path);
  return read_lines(reader);
}

StepLog parse_step_log(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  JsonlReader reader(in, source);
  return read_lines(reader);
}

}  // namespace stoa::trainer
