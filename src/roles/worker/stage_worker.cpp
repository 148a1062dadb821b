#include "roles/worker/stage_worker.h"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "net/frame_socket.h"
#include "net/hub_client.h"
#include "roles/pipeline/stage_server.h"
#include "roles/pipeline/tcp_stage_link.h"
#include "roles/worker/heartbeat.h"
#include "roles/worker/lease_book.h"
#include "roles/worker/memory_check.h"
#include "roles/worker/sync_thread.h"
#include "roles/worker/worker_threads.h"

namespace stoa::worker {
namespace {
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// An answer from the stages after this one may wait for each of them to verify a version. A
// stage nearer the end waits 5 s less than the one before it, so when a stage stalls, the stage
// before it gives up first and says so (StageServerCounters::next_failures): the hub then knows
// which member stalled.
std::chrono::milliseconds answer_deadline(const WorkerOptions& o) {
  return std::chrono::seconds(static_cast<int64_t>(o.stage_wait_s) * o.stages + 60 +
                              5 * static_cast<int64_t>(o.stages - 1 - o.stage));
}

}  // namespace

LayerSpan pipeline_span(const ModelConfig& config, const WorkerOptions& o) {
  STOA_CHECK(o.stages >= 2 && o.stage >= 0 && o.stage < o.stages, ErrorKind::kInvalidArgument,
             "stage ", o.stage, " of ", o.stages,
             ": a pipeline group has 2 or more stages, numbered from 0");
  STOA_CHECK(o.stages <= config.num_layers, ErrorKind::kInvalidArgument, "a model of ",
             config.num_layers, " layers is cut into at most as many stages, not ", o.stages);
  const bool last = o.stage == o.stages - 1;
  STOA_CHECK(last == (o.stage_next.empty() && o.stage_next_key.empty()),
             ErrorKind::kInvalidArgument,
             last ? "the last stage links to no next stage (no --stage-next)"
                  : "a stage before the last needs --stage-next HOST:PORT (the stage after it)");
  STOA_CHECK(o.stage_wait_s > 0, ErrorKind::kInvalidArgument, "--stage-wait must be > 0");
  return split_layers(config, o.stages)[static_cast<size_t>(o.stage)];
}

std::unique_ptr<engine::StageLink> link_to_next_stage(const WorkerOptions& o) {
  pipeline::TcpStageLinkOptions lo;
  lo.answer_deadline = answer_deadline(o);
  lo.relay_key = o.stage_next_key;  // then stage_relay is the relay the next stage serves at
  const auto [host, port] = o.stage_next_key.empty()
                                ? net::parse_host_port(o.stage_next, "--stage-next")
                                : net::parse_host_port(o.stage_relay, "the hub's stage relay");
  return std::make_unique<pipeline::TcpStageLink>(host, port, lo);
}

int stage_named_in(const std::string& reason, const ModelConfig& config, int stages) {
  if (stages < 2 || stages > config.num_layers) return -1;
  const std::vector<LayerSpan> spans = split_layers(config, stages);
  for (int s = 1; s < stages; ++s)
    if (reason.find(cat("stage ", span_string(config, spans[static_cast<size_t>(s)]), ": ")) !=
        std::string::npos)
      return s;
  return -1;
}

uint64_t smallest_stage_need(const ModelConfig& config) {
  const int64_t most = std::min<int64_t>(config.num_layers, 16);  // PipelineGroupOptions
  uint64_t least = memory_needed(config).total();
  for (const LayerSpan& span : split_layers(config, std::max<int64_t>(most, 1)))
    least = std::min(least, memory_needed(config, span).total());
  return least;
}

int stage_port(const WorkerOptions& o) {
  auto [host, port] = net::parse_host_port(o.stage_listen, "--stage-listen");
  if (port != 0) return port;
  net::FrameListener probe(host, 0);  // a free port now; the stage binds it again when placed
  return probe.port();
}

std::optional<net::PipelinePlace> wait_for_place(net::HubClient& hub, const PlaceAsk& ask,
                                                 const std::atomic<bool>& stop) {
  auto last_said = Clock::now() - 1h;
  while (!stop) {
    try {
      net::PipelinePlace place =
          hub.pipeline_place(ask.memory_bytes, ask.port, ask.relayed, {}, ask.commit_key);
      if (place.placed) return place;
      if (Clock::now() - last_said > 30s) {
        log_info("worker", "waiting for a pipeline group: ", place.waiting,
                 " workers wait at the hub (together they must hold the model)");
        last_said = Clock::now();
      }
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kNetwork) throw;  // this hub forms no groups, or refused
      log_warn("worker", "asking for a pipeline group: ", e.what());
    }
    for (int i = 0; i < 10 && !stop; ++i) std::this_thread::sleep_for(100ms);
  }
  return std::nullopt;
}

PlaceWatch::PlaceWatch(net::HubClient& hub, const PlaceAsk& ask, uint64_t group_id,
                       const std::atomic<bool>& stop, const GroupHealth* health)
    : thread_([this, &hub, ask, group_id, &stop, health](std::stop_token done) {
        while (!leave_) {
          // `stop` is the process's signal flag, which can wake nobody: looked at every 100 ms.
          for (int i = 0; i < 20 && !stop; ++i)
            if (wait_for_stop(done, 100ms)) return;
          if (stop) {
            leave_ = true;
            return;
          }
          try {
            const net::PipelinePlace place = hub.pipeline_place(
                ask.memory_bytes, ask.port, ask.relayed,
                health ? health->report() : net::PipelineGroupReport{}, ask.commit_key);
            if (!place.placed || place.group_id != group_id) {
              log_info("worker", "the hub dissolved pipeline group ", group_id,
                       " (a member is gone, or the group kept breaking)");
              leave_ = true;
            }
          } catch (const std::exception& e) {
            log_warn("worker", "renewing the pipeline group's place: ", e.what());
          }
        }
      }) {}

std::string url_host(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t start = scheme == std::string::npos ? 0 : scheme + 3;
  if (start < url.size() && url[start] == '[') {  // [IPv6]:port
    const size_t close = url.find(']', start);
    return url.substr(start + 1,
                      close == std::string::npos ? std::string::npos : close - start - 1);
  }
  const size_t end = url.find_first_of(":/", start);
  return url.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

WorkerOptions placed_options(const WorkerOptions& o, const net::PipelinePlace& place,
                             const std::string& hub_host, int port) {
  WorkerOptions placed = o;
  placed.stages = place.stages;
  placed.stage = place.stage;
  placed.stage_next = place.next;
  placed.stage_listen = "0.0.0.0:" + std::to_string(port);
  placed.stage_serve_key = place.serve_key;
  placed.stage_next_key = place.next_key;
  placed.pipeline_group = place.group_id;
  placed.stage_keys.assign(place.stage_keys.size(), PublicKey{});
  for (size_t s = 0; s < place.stage_keys.size(); ++s)
    (void)parse_hex(place.stage_keys[s], placed.stage_keys[s]);  // the place checked them
  placed.stage_relay =
      place.relay_port > 0 ? hub_host + ":" + std::to_string(place.relay_port) : std::string();
  return placed;
}

uint64_t SyncedStageWeights::bring_to(uint64_t version) {
  const auto deadline = Clock::now() + std::chrono::seconds(wait_s_);
  while (true) {
    if (sync_.engine_usable() && sync_.engine_version() < version)
      (void)sync_.take_update_through(version);  // what is verified up to it
    const uint64_t held = sync_.engine_version();
    if (sync_.engine_usable() && held >= version) return held;
    STOA_CHECK(
        Clock::now() < deadline, ErrorKind::kNetwork, "this stage's weights reached version ", held,
        " (verified: ", sync_.version().value_or(0), "), not the head's ", version, ", within ",
        wait_s_, " s", sync_.last_error().empty() ? "" : ": ", sync_.last_error());
    std::this_thread::sleep_for(20ms);
  }
}

std::shared_lock<std::shared_mutex> SyncedStageWeights::pass_lock() {
  std::shared_lock<std::shared_mutex> lock = sync_.pass_lock();
  STOA_CHECK(sync_.engine_usable(), ErrorKind::kInvalidArgument,
             "this stage's weights are a mix (an anchor failed part-way): no pass until the next");
  return lock;
}

WorkerStats run_stage_worker(const WorkerOptions& o, const std::atomic<bool>& stop) {
  WorkerSession session(o);
  session.join(o.threads, stop);
  const std::string model_dir = session.model_dir();
  const ModelConfig config = load_model_config(model_dir + "/config.json");
  session.check_vocabulary(config, model_dir);
  return serve_stage(o, session, config, stop);
}

WorkerStats serve_stage(const WorkerOptions& o, WorkerSession& session, const ModelConfig& config,
                        const std::atomic<bool>& stop) {
  net::HubClient& hub = session.hub();
  const net::JoinResponse& joined = session.joined();
  const LayerSpan span = pipeline_span(config, o);
  const MemoryNeed need = memory_needed(config, span);
  if (const auto memory = session.memory_available()) check_memory(need, *memory);
  log_info("worker", "worker ", joined.worker_id, " is stage ", o.stage, " of ", o.stages, ", ",
           span_string(config, span), " (", human_bytes(need.weights_bytes), " of int8 weights)");

  HubBlobSource source(hub, session.state_path("blobs"));
  WeightSync sync(source, config, span);  // the engine holds the span's tensors only
  // Heartbeats keep the stage a live worker at the hub (it holds no leases: they are the head's).
  LeaseBook no_leases;
  WorkerGauges gauges;
  // A stage hands nothing over when it stops (the group's rollouts are the head's): no grace for
  // its long-poll, the hub calls in flight are cancelled at once.
  WorkerThreads threads(hub, std::chrono::milliseconds{0});
  threads.start_hub_loop([&sync](std::stop_token stop_sync) { run_weight_sync(sync, stop_sync); });
  threads.start_hub_loop([&](std::stop_token stop_beating) {
    run_heartbeat(hub, joined.worker_id, joined.heartbeat_interval_s, no_leases, gauges,
                  stop_beating);
  });

  // The first anchor builds the stage's engine; the head names the version to compute with.
  std::unique_ptr<engine::EngineWeights> weights;
  while (!stop && !weights) {
    if (auto update = sync.take_update_through(0); update && update->engine)
      weights = std::move(update->engine);
    else
      std::this_thread::sleep_for(100ms);
  }
  WorkerStats stats;
  if (!weights) return stats;
  auto stage = std::make_unique<engine::PipelineStage>(std::move(weights), nullptr, session.pool());
  SyncedStageWeights stage_weights(sync, o.stage_wait_s);
  stage->set_weights_source(&stage_weights);
  if (o.stage_commit_key) stage->set_commit_key(o.pipeline_group, o.stage, *o.stage_commit_key);
  pipeline::StageServerOptions so;
  std::tie(so.listen_host, so.listen_port) = net::parse_host_port(o.stage_listen, "--stage-listen");
  if (!o.stage_serve_key.empty()) {  // behind NAT: the stage before joins us at the relay
    std::tie(so.relay_host, so.relay_port) =
        net::parse_host_port(o.stage_relay, "the hub's stage relay");
    so.relay_key = o.stage_serve_key;
  }
  if (!o.stage_next_key.empty()) {
    std::tie(so.next_host, so.next_port) =
        net::parse_host_port(o.stage_relay, "the hub's stage relay");
    so.next_relay_key = o.stage_next_key;
  } else if (!o.stage_next.empty()) {
    std::tie(so.next_host, so.next_port) = net::parse_host_port(o.stage_next, "--stage-next");
  }
  so.answer_deadline = answer_deadline(o);
  pipeline::StageServer server(std::move(stage), so);
  log_info("worker", "stage ", o.stage, " serves ", span_string(config, span), " on port ",
           server.port(), " (weights version ", sync.engine_version(), ")");
  if (o.progress) {
    std::printf("%s\n", nlohmann::json{{"stage", o.stage},
                                       {"port", server.port()},
                                       {"layers", {span.first, span.last}},
                                       {"weight_bytes", need.weights_bytes}}
                            .dump()
                            .c_str());
    std::fflush(stdout);
  }
  const auto started = Clock::now();
  while (!stop && (o.max_minutes <= 0 ||
                   Clock::now() - started < std::chrono::duration<double>(o.max_minutes * 60))) {
    gauges.engine_version = sync.engine_version();  // what the heartbeat reports
    if (o.group_health) o.group_health->next_failures = server.counters().next_failures;
    gauges.have_engine = true;
    std::this_thread::sleep_for(100ms);
  }
  server.stop();
  sync.detach_engine();  // before the stage's engine goes with the server
  const pipeline::StageServerCounters c = server.counters();
  log_info("worker", "stage ", o.stage, " stopped: ", c.sessions, " sessions, ", c.frames,
           " frames, weights version ", sync.engine_version());
  stats.weight_switches = sync.counters().blobs_applied;
  return stats;
}

}  // namespace stoa::worker
