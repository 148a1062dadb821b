// `stoa hub --config run.toml`: the hub without a trainer (split_run.h).
#include <chrono>
#include <cstdio>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "roles/hub/hub.h"
#include "roles/run/hub_process.h"
#include "roles/run/run_config.h"
#include "roles/run/split_run.h"
#include "roles/run/stop_signals.h"

namespace stoa::run {

int run_hub_alone(const std::string& config_path) {
  const std::atomic<bool>& stop = stop_on_signals();
  const RunConfig c = load_run_config(config_path);
  HubProcess process(c, /*serve_trainer=*/true);
  hub::Hub& hub = process.hub();
  nlohmann::json info = {{"last_step", hub.last_step()}};
  if (auto v = hub.latest_version()) info["version"] = *v;
  process.serve(info, "stoa hub");
  if (!hub.latest_version())
    log_info("hub", "no version yet: workers wait until a trainer attaches and publishes one");
  while (!stop.load()) {
    hub.expire_leases();  // also done lazily by leases and heartbeats; an idle fleet needs this
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  log_info("hub", "stopping at ledger step ", hub.last_step());
  process.stop();
  nlohmann::json summary = {{"steps", hub.last_step()}};
  if (auto v = hub.latest_version()) summary["version"] = *v;
  for (const auto& [k, v] : hub.counters()) summary["counters"][k] = v;
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace stoa::run
