#include "roles/worker/heartbeat.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "core/log.h"
#include "roles/worker/token_rate.h"
#include "roles/worker/worker_threads.h"

namespace stoa::worker {

void run_heartbeat(net::HubClient& hub, const std::string& worker_id, int heartbeat_interval_s,
                   LeaseBook& book, WorkerGauges& gauges, std::stop_token stop) {
  const auto interval = std::chrono::seconds(std::max(1, heartbeat_interval_s / 2));
  // Over ~30 s, not per beat: a beat that fell between two leases would report 0 (token_rate.h).
  RollingRate rate(std::chrono::seconds(30));
  rate.sample(gauges.tokens_generated);
  while (!wait_for_stop(stop, interval)) {
    net::Heartbeat hb;
    hb.worker_id = worker_id;
    if (gauges.have_engine) hb.version = gauges.engine_version.load();
    hb.leases = book.lease_ids();
    hb.tokens_generated = gauges.tokens_generated;
    hb.tokens_per_s = rate.sample(hb.tokens_generated);
    hb.idle_fraction = gauges.idle_fraction;
    if (gauges.download) hb.download = gauges.download();
    if (gauges.swarm) hb.swarm = gauges.swarm();
    try {
      const net::HeartbeatResponse answer = hub.heartbeat(hb);
      gauges.hub.answered();
      book.mark_cancelled(answer.cancelled);
      if (answer.run_ended) gauges.run_ended = true;
    } catch (const net::JoinRefused& e) {
      // The session lapsed and resuming it was refused (the join token was revoked): every
      // later call would be refused too, so the rollout loop stops the worker.
      gauges.hub.answered();
      gauges.fatal.set(e.what());
    } catch (const std::exception& e) {
      if (is_unreachable(e)) {
        gauges.hub.unreachable("heartbeat", e.what());
        continue;
      }
      gauges.hub.answered();
      log_warn("worker", "heartbeat: ", e.what());
      // Every later call would be refused too: the rollout loop stops the worker.
      if (std::string(e.what()).find("quarantined") != std::string::npos)
        gauges.fatal.set(e.what());
    }
  }
}

}  // namespace stoa::worker
