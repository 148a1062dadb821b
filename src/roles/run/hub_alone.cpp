// `stoa hub --config run.toml`: the hub without a trainer (split_run.h). It serves until a signal
// or until its trainer reports the run's last step.
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
  // Until a signal, or until the trainer says the run reached its last step
  // (POST /v1/trainer/finished): then the run ends here as it does in `stoa run`.
  while (!stop.load() && !hub.run_ended()) {
    hub.expire_leases();  // also done lazily by leases and heartbeats; an idle fleet needs this
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const bool finished = !stop.load();
  if (finished) {
    std::printf("stoa hub: the run is finished: the trainer ended it at ledger step %lld\n",
                static_cast<long long>(hub.last_step()));
    std::fflush(stdout);
    tell_workers_the_run_ended(hub, c.hub.heartbeat_interval_s, stop);
  }
  log_info("hub", "stopping at ledger step ", hub.last_step());
  process.stop();
  nlohmann::json summary = {{"steps", hub.last_step()}, {"finished", finished}};
  if (auto v = hub.latest_version()) summary["version"] = *v;
  for (const auto& [k, v] : hub.counters()) summary["counters"][k] = v;
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace stoa::run
