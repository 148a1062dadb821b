// The arithmetic of `stoa bench fleet` (fleet_bench.cpp), kept apart from the process
// and network plumbing so tests/app/fleet can check it on hand-written inputs:
//   - worker log lines ("2026-11-30T08:00:00.123Z I [worker] generating with version 7") → the
//     moments each worker switched weights, and its final idle fraction;
//   - weight-sync latency: for each version v the hub published at P(v) inside the window, and
//     each worker, the first switch to a version >= v at S — latency S - P(v). A worker that skips
//     v (it caught up to a newer version directly) is fresh for v at that same switch, so
//     skipping is not a loss; a version no worker reached before the window closed is counted
//     as unsynced, not as a latency; versions published before a worker's first weights are
//     its cold start, which the bench reports on its own;
//   - the trainer's busy fraction over all steps of steps.jsonl, time-weighted (step_log.h);
//   - percentiles.
// Header-only: the cli's CMake builds only cmd_*.cpp, and this is not a command.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "roles/trainer/step_log.h"

namespace stoa::app::fleet {

// "YYYY-MM-DDTHH:MM:SS.mmmZ" at the start of `line` (core/log.cpp's stamp) → unix ms.
inline std::optional<int64_t> parse_log_time(const std::string& line) {
  if (line.size() < 24 || line[4] != '-' || line[10] != 'T' || line[19] != '.' || line[23] != 'Z')
    return std::nullopt;
  std::tm tm{};
  int ms = 0;
  if (std::sscanf(line.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
}

struct Switch {
  int64_t unix_ms = 0;
  uint64_t version = 0;
};

struct WorkerLog {
  std::vector<Switch> switches;      // in log order
  std::optional<double> idle;        // from the final "stopped: ..." line
  std::optional<uint64_t> rollouts;  // idem
  std::optional<uint64_t> tokens;    // idem
  int64_t warnings = 0;              // W and E lines (sync refetches, anchor fallbacks, ...)
};

inline WorkerLog parse_worker_log(const std::string& text) {
  WorkerLog w;
  std::istringstream in(text);
  std::string line;
  static const std::string kSwitch = "generating with version ";
  static const std::string kStopped = "[worker] stopped: ";
  while (std::getline(in, line)) {
    if (line.size() > 26 && parse_log_time(line) && (line[25] == 'W' || line[25] == 'E'))
      ++w.warnings;
    if (auto p = line.find(kSwitch); p != std::string::npos) {
      const auto t = parse_log_time(line);
      if (!t) continue;
      try {
        w.switches.push_back({*t, std::stoull(line.substr(p + kSwitch.size()))});
      } catch (const std::exception&) {
      }
    } else if (auto q = line.find(kStopped); q != std::string::npos) {
      // "... stopped: 12 rollouts (...), 3456 tokens, 9 weight switches, idle 0.25"
      const std::string rest = line.substr(q + kStopped.size());
      try {
        w.rollouts = std::stoull(rest);
        if (auto i = rest.rfind(" idle "); i != std::string::npos)
          w.idle = std::stod(rest.substr(i + 6));
        if (auto k = rest.find(" tokens,"); k != std::string::npos) {
          auto b = rest.rfind(' ', k - 1);
          w.tokens = std::stoull(rest.substr(b + 1, k - b - 1));
        }
      } catch (const std::exception&) {
      }
    }
  }
  return w;
}

struct SyncLatencies {
  std::vector<double> ms;  // one per (version, worker) pair that synced inside the window
  int64_t unsynced = 0;    // (version, worker) pairs not reached before the window closed
  int64_t skipped = 0;     // pairs reached by switching straight to a newer version
};

// publish: version → unix ms the hub published it (only versions to measure); switches: per
// worker, in time order; window_end_ms: switches after it do not count.
inline SyncLatencies sync_latencies(const std::map<uint64_t, int64_t>& publish,
                                    const std::vector<std::vector<Switch>>& workers,
                                    int64_t window_end_ms) {
  SyncLatencies r;
  for (const auto& [v, published] : publish) {
    for (const auto& sw : workers) {
      // Versions published before the worker held any weights are its cold start (reported
      // apart), not a sync of a running worker.
      if (sw.empty() || sw.front().unix_ms > published) {
        if (sw.empty()) ++r.unsynced;
        continue;
      }
      const Switch* hit = nullptr;
      for (const Switch& s : sw)
        if (s.version >= v && s.unix_ms >= published && s.unix_ms <= window_end_ms) {
          hit = &s;
          break;
        }
      if (!hit) {
        ++r.unsynced;
        continue;
      }
      r.ms.push_back(static_cast<double>(hit->unix_ms - published));
      if (hit->version != v) ++r.skipped;
    }
  }
  return r;
}

// Linear interpolation between closest ranks; NaN for an empty sample.
inline double percentile(std::vector<double> xs, double p) {
  if (xs.empty()) return std::nan("");
  std::sort(xs.begin(), xs.end());
  const double pos = p / 100.0 * static_cast<double>(xs.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, xs.size() - 1);
  return xs[lo] + (xs[hi] - xs[lo]) * (pos - static_cast<double>(lo));
}

// steps.jsonl → the run's step summary (roles/trainer/step_log.h), whose busy fraction is
// time-weighted: Σ compute / Σ (gather wait + compute), not a mean of per-step ratios. Unusable
// lines (a torn last line of a killed run) are skipped.
using TrainerSummary = trainer::StepSummary;
inline TrainerSummary summarize_steps(const std::string& jsonl) {
  return trainer::summarize_steps(trainer::parse_step_log(jsonl, "steps.jsonl").records);
}

}  // namespace stoa::app::fleet
