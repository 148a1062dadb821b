// What an operator reads, built from a HubSnapshot (observe/hub_counters.h) with no lock held:
// the counters the demo summary reads, GET /v1/status (JSON), GET /metrics (Prometheus text
// format 0.0.4), and the point a trainer step adds to the run's history.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "roles/hub/observe/hub_counters.h"
#include "roles/hub/observe/run_history.h"
#include "roles/hub/verification/rollout_audit.h"

namespace stoa::hub {

// What the reports say beyond the snapshot.
struct ReportContext {
  std::string task;              // the run's task name
  bool beyond_loopback = false;  // the hub serves workers beyond loopback (the verify warning)
  size_t limit = 0;              // the page size the worker list was taken with
  VerifyPolicy verify;           // the run's [verify]: the mode /v1/status states
};

std::map<std::string, double> counter_map(const HubSnapshot& snapshot);
nlohmann::json status_json(const HubSnapshot& snapshot, const ReportContext& context);
std::string metrics_text(const HubSnapshot& snapshot, const ReportContext& context);
// The history point of trainer step `report` at `now_ms`: the fleet figures from the workers
// heard from in the last minute.
StepPoint step_point(const StepReport& report, int64_t now_ms, int64_t start_ms,
                     std::optional<uint64_t> latest,
                     const std::map<std::string, WorkerStats>& workers);

}  // namespace stoa::hub
