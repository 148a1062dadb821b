#include "roles/worker/heartbeat.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "core/log.h"
#include "roles/worker/token_rate.h"

namespace stoa::worker {
namespace {
using namespace std::chrono_literals;
}  // namespace

HeartbeatThread::HeartbeatThread(net::HubClient& hub, std::string worker_id,
                                 int heartbeat_interval_s, LeaseBook& book,
                                 const WorkerGauges& gauges, const std::atomic<bool>& stop,
                                 std::atomic<int>& done)
    : hub_(hub),
      worker_id_(std::move(worker_id)),
      interval_s_(heartbeat_interval_s),
      book_(book),
      gauges_(gauges),
      stop_(stop),
      done_(done),
      thread_([this] { loop(); }) {}

void HeartbeatThread::loop() {
  const auto interval = std::chrono::seconds(std::max(1, interval_s_ / 2));
  // Over ~30 s, not per beat: a beat that fell between two leases would report 0 (token_rate.h).
  RollingRate rate(std::chrono::seconds(30));
  rate.sample(gauges_.tokens_generated);
  while (!stop_) {
    for (auto waited = 0ms; waited < interval && !stop_; waited += 100ms)
      std::this_thread::sleep_for(100ms);
    if (stop_) break;
    net::Heartbeat hb;
    hb.worker_id = worker_id_;
    if (gauges_.have_engine) hb.version = gauges_.engine_version.load();
    hb.leases = book_.lease_ids();
    hb.tokens_generated = gauges_.tokens_generated;
    hb.tokens_per_s = rate.sample(hb.tokens_generated);
    hb.idle_fraction = gauges_.idle_fraction;
    if (gauges_.download) hb.download = gauges_.download();
    if (gauges_.swarm) hb.swarm = gauges_.swarm();
    try {
      book_.mark_cancelled(hub_.heartbeat(hb).cancelled);
    } catch (const std::exception& e) {
      log_warn("worker", "heartbeat: ", e.what());
      // Every later call would be refused too: the rollout loop stops the worker.
      if (std::string(e.what()).find("quarantined") != std::string::npos)
        gauges_.fatal.set(e.what());
    }
  }
  ++done_;
}

}  // namespace stoa::worker
