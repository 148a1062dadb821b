#include "app/status/status_view.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

namespace stoa::app {

using nlohmann::json;

namespace {

// Length of the UTF-8 sequence starting with `lead`, 0 if `lead` cannot start one.
size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return lead >= 0xC2 ? 2 : 0;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return lead <= 0xF4 ? 4 : 0;
  return 0;
}

double number(const json& j, const char* key, double fallback = 0) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string text_field(const json& j, const char* key, size_t max_chars) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "-";
  return printable(it->is_string() ? it->get<std::string>() : it->dump(), max_chars);
}

// The string at `key`, "" when absent or not a string (the hub's JSON is not trusted to be sane).
std::string string_field(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string version_text(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return "none";
  return std::to_string(j[key].get<int64_t>());
}

std::string pad(std::string s, size_t width) {
  // Counts code points, not bytes, so names in any script line up.
  size_t points = 0;
  for (unsigned char c : s) points += (c & 0xC0) != 0x80;
  if (points < width) s.append(width - points, ' ');
  return s;
}

}  // namespace

std::string printable(const std::string& text, size_t max_chars) {
  std::string out;
  size_t points = 0;
  size_t i = 0;
  while (i < text.size() && points < max_chars) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t n = utf8_length(lead);
    bool valid = n > 0 && i + n <= text.size();
    for (size_t k = 1; valid && k < n; ++k)
      valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    if (!valid) {
      out += '?';
      i += 1;
    } else if (n == 1) {
      out += (lead < 0x20 || lead == 0x7F) ? '?' : static_cast<char>(lead);
      i += 1;
    } else if (n == 2 && lead == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      out += '?';  // C1 controls (U+0080..U+009F), e.g. the 8-bit CSI
      i += 2;
    } else {
      out.append(text, i, n);
      i += n;
    }
    ++points;
  }
  if (i < text.size()) out += "…";
  return out;
}

std::string render_status(const json& status, const StatusViewOptions& options) {
  std::ostringstream o;
  const json& counters = status.value("counters", json::object());
  const json& step = status.value("last_step", json::object());
  o << "Stoa hub  task " << text_field(status, "task", 24) << "  protocol "
    << text_field(status, "protocol", 8) << "  up " << format("%.0f", number(status, "uptime_s"))
    << " s\n";
  o << "version " << version_text(status, "latest_version") << "  trainer step "
    << format("%.0f", number(status, "step")) << "  leases open "
    << format("%.0f", number(status, "leases_open")) << "  groups queued "
    << format("%.0f", number(counters, "groups_queued")) << "\n";
  if (step.is_object() && !step.empty()) {
    o << "last step: reward " << format("%.3f", number(step, "reward_mean")) << "  masked "
      << format("%.4f", number(step, "masked_fraction")) << "  TV "
      << format("%.4f", number(step, "tv")) << "  busy "
      << format("%.0f%%", 100 * number(step, "busy_fraction")) << "  "
      << format("%.1f s", number(step, "step_seconds")) << "  groups "
      << format("%.0f", number(step, "groups")) << "\n";
  } else {
    o << "last step: none yet\n";
  }
  // [eval]'s latest held-out evaluation, which the trainer reports with every later step
  // (roles/trainer/held_out_eval.h): the task's mean reward and each pass@k it measured.
  const json extra = step.is_object() ? step.value("extra", json::object()) : json::object();
  if (extra.is_object() && extra.contains("eval_mean_reward")) {
    o << "held-out eval at step " << format("%.0f", number(extra, "eval_step")) << " (version "
      << format("%.0f", number(extra, "eval_version")) << "): mean reward "
      << format("%.3f", number(extra, "eval_mean_reward"));
    const std::string prefix = "eval_pass_at_";
    for (const auto& [key, value] : extra.items())
      if (key.rfind(prefix, 0) == 0 && value.is_number())
        o << "  pass@" << text_field(json{{"k", key.substr(prefix.size())}}, "k", 4) << " "
          << format("%.3f", value.get<double>());
    o << "  over " << format("%.0f", number(extra, "eval_questions")) << " questions\n";
  }
  o << "rollouts accepted " << format("%.0f", number(counters, "rollouts_accepted"))
    << "  rejected " << format("%.0f", number(counters, "rollouts_rejected")) << "  duplicate "
    << format("%.0f", number(counters, "rollouts_duplicate")) << "  groups trained "
    << format("%.0f", number(counters, "groups_trained")) << "  dropped "
    << format("%.0f", number(counters, "groups_dropped")) << "\n";
  for (const char* key : {"rollouts_verified", "verification_failures", "workers_quarantined"})
    if (counters.is_object() && counters.contains(key))
      o << key << " " << format("%.0f", number(counters, key)) << "  ";
  o << "\n";
  // Steps that changed nothing (roles/hub/observe/learning_signal.h): a run can look busy and
  // learn nothing, so the screen says how many and warns past the run's limit.
  const json& signal = status.value("learning_signal", json::object());
  if (signal.is_object() && !signal.empty()) {
    o << "learning signal: " << format("%.0f", number(signal, "steps_without_signal")) << " of "
      << format("%.0f", number(signal, "steps")) << " steps without ("
      << format("%.0f", number(signal, "consecutive_steps_without_signal")) << " in a row), "
      << format("%.0f", number(signal, "groups_uniform")) << " of "
      << format("%.0f", number(signal, "groups")) << " groups uniform\n";
    if (signal.contains("warning")) o << "WARNING: " << text_field(signal, "warning", 400) << "\n";
  }

  const json workers = status.value("workers", json::array());
  // Workers that joined under the same name (every `stoa work` without --name is "worker") are
  // told apart by their id.
  std::map<std::string, int> name_count;
  for (const auto& w : workers) ++name_count[string_field(w, "name")];
  const size_t name_width =
      static_cast<size_t>(std::clamp(options.width - 58, 8, 40));  // the numbers take ~58 columns
  o << pad("worker", name_width) << "  version  lag   tokens/s   idle  accepted  seen\n";
  int shown = 0;
  double tokens_per_s = 0;
  for (const auto& w : workers) {
    tokens_per_s += number(w, "tokens_per_s");
    if (shown >= options.max_workers) continue;
    ++shown;
    std::string name = text_field(w, "name", name_width);
    if (name_count[string_field(w, "name")] > 1)
      name = printable(string_field(w, "name") + " (" + string_field(w, "id") + ")", name_width);
    char line[160];
    std::snprintf(line, sizeof line, "  %7s  %3s  %9.1f  %4.0f%%  %8.0f  %3.0f s",
                  version_text(w, "version").c_str(),
                  w.contains("patch_lag") ? format("%.0f", number(w, "patch_lag")).c_str() : "-",
                  number(w, "tokens_per_s"), 100 * number(w, "idle_fraction"),
                  number(w, "rollouts_accepted"), number(w, "seen_s_ago"));
    o << pad(name, name_width) << line << "\n";
  }
  const auto total = static_cast<int>(workers.size());
  if (total > shown) o << "… and " << (total - shown) << " more workers\n";
  o << total << " workers, " << format("%.1f", tokens_per_s) << " tokens/s in all\n";
  return o.str();
}

}  // namespace stoa::app
