#include "roles/worker/sync_only.h"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "net/hub_client.h"
#include "roles/worker/swarm_source.h"
#include "roles/worker/weight_sync.h"
#include "roles/worker/worker_session.h"

namespace stoa::worker {
namespace {

double mib(uint64_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

nlohmann::json swarm_json(const SwarmBlobSource* swarm) {
  if (!swarm) return nullptr;
  const net::swarm::SwarmStats s = swarm->stats();
  return {{"from_peers_bytes", s.from_peers_bytes},
          {"from_hub_bytes", s.from_hub_bytes},
          {"uploaded_bytes", s.uploaded_bytes},
          {"serving_peers", s.serving_peers},
          {"seeding", s.seeding},
          {"banned_peers", s.banned_peers},
          {"hash_failures", s.hash_failures},
          {"upload_kib_s", s.upload_kib_s},
          {"fallbacks", swarm->fallbacks()}};
}

}  // namespace

void run_sync_only(const WorkerOptions& o, const std::atomic<bool>& stop) {
  WorkerSession session(o);
  const net::JoinResponse& joined = session.join(1, stop);
  net::HubClient& hub = session.hub();
  HubBlobSource hub_source(hub, session.state_path("blobs"));
  // Before "joined": its uplink probe takes a few seconds, and whoever waits for the line
  // (stoa bench swarm) then times the sync alone.
  std::unique_ptr<SwarmBlobSource> swarm =
      make_swarm_source(o, hub, hub_source, session.state_dir());
  std::printf("joined %s as %s (sync only)\n", session.hub_url().c_str(), joined.worker_id.c_str());
  std::fflush(stdout);
  BlobSource& source = swarm ? static_cast<BlobSource&>(*swarm) : hub_source;
  WeightSync sync(source, std::optional<Hash128>{});  // the first anchor names the model
  const auto started = std::chrono::steady_clock::now();
  auto out_of_time = [&] {
    return o.max_minutes > 0 && std::chrono::steady_clock::now() - started >
                                    std::chrono::duration<double>(o.max_minutes * 60);
  };
  std::optional<uint64_t> held;
  uint64_t bytes_before = 0;
  while (!stop && !out_of_time()) {
    try {
      sync.step(std::chrono::seconds(5));
    } catch (const std::exception& e) {
      log_warn("worker", "sync: ", e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    const std::optional<uint64_t> now = sync.version();
    if (!now || now == held) continue;
    held = now;
    const uint64_t fetched = sync.counters().bytes_fetched;
    std::string counters;
    if (swarm) {
      const net::swarm::SwarmStats s = swarm->stats();
      char line[256];
      std::snprintf(line, sizeof line,
                    "; swarm: %.1f MiB from peers, %.1f MiB from the hub, served %.1f MiB to %d "
                    "peers, %llu fallbacks",
                    mib(s.from_peers_bytes), mib(s.from_hub_bytes), mib(s.uploaded_bytes),
                    s.serving_peers, static_cast<unsigned long long>(swarm->fallbacks()));
      counters = line;
    }
    std::printf("holding version %llu (%.1f MiB fetched%s)\n",
                static_cast<unsigned long long>(*now), mib(fetched - bytes_before),
                counters.c_str());
    std::fflush(stdout);
    bytes_before = fetched;
  }
  std::printf("%s\n", nlohmann::json{{"version", held ? nlohmann::json(*held) : nullptr},
                                     {"bytes_fetched", sync.counters().bytes_fetched},
                                     {"swarm", swarm_json(swarm.get())}}
                          .dump()
                          .c_str());
  std::fflush(stdout);
}

}  // namespace stoa::worker
