#include "roles/worker/worker.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "env/model_codec.h"
#include "env/tasks/builtin_tasks.h"
#include "net/hub_client.h"
#include "pulse/model_view.h"
#include "roles/worker/check_thread.h"
#include "roles/worker/heartbeat.h"
#include "roles/worker/hub_task.h"
#include "roles/worker/lease_book.h"
#include "roles/worker/memory_check.h"
#include "roles/worker/progress_report.h"
#include "roles/worker/rollout_loop.h"
#include "roles/worker/rollout_streamer.h"
#include "roles/worker/stage_worker.h"
#include "roles/worker/swarm_source.h"
#include "roles/worker/sync_thread.h"
#include "roles/worker/weight_sync.h"
#include "roles/worker/worker_session.h"
#include "roles/worker/worker_threads.h"

namespace stoa::worker {
namespace {

// What a joined worker generates with (run_worker's, for generate_rollouts and the group loop).
struct Joined {
  WorkerSession& session;
  const ModelConfig& config;
  const env::ModelCodec& model_codec;
  const env::Task& task;
  bool room_for_checks;
  uint64_t memory_bytes;  // what this worker may use (a group member says it to the hub)
};

// Joined, with the model and the task: the weight sync, the heartbeat, the streamer, the checks
// and the rollout loop until `stop`, then a clean shutdown.
WorkerStats generate_rollouts(const WorkerOptions& o, const Joined& j,
                              const std::atomic<bool>& stop) {
  WorkerSession& session = j.session;
  net::HubClient& hub = session.hub();
  const net::JoinResponse& joined = session.joined();
  const ModelConfig& config = j.config;
  ProgressReport* const report = session.report();
  const int64_t sample_vocab = j.model_codec.sample_vocab;
  const env::TokenCodec& codec = *j.model_codec.codec;
  // ---- what the background threads work on: the weight sync, the lease book, the gauges ----
  // Blobs download to <state dir>/blobs and resume from there (after a drop or a restart).
  HubBlobSource hub_source(hub, session.state_path("blobs"));
  std::unique_ptr<SwarmBlobSource> swarm_source =
      make_swarm_source(o, hub, hub_source, session.state_dir());
  BlobSource& source = swarm_source ? static_cast<BlobSource&>(*swarm_source) : hub_source;
  // The engine's weights are the one resident copy (a group's head: its span's only).
  std::unique_ptr<WeightSync> sync_ptr =
      o.stages > 1 ? std::make_unique<WeightSync>(source, config, pipeline_span(config, o))
                   : std::make_unique<WeightSync>(source, config);
  WeightSync& sync = *sync_ptr;
  LeaseBook book;
  WorkerGauges gauges;
  if (swarm_source)
    gauges.swarm = [&swarm_source]() -> std::optional<net::SwarmServing> {
      const net::swarm::SwarmStats s = swarm_source->stats();
      return net::SwarmServing{s.uploaded_bytes, s.from_peers_bytes, s.from_hub_bytes,
                               s.serving_peers, s.seeding};
    };
  gauges.download = [&] {
    return swarm_source ? swarm_source->download_progress() : hub_source.download_progress();
  };
  gauges.fetching = [&sync] { return sync.fetching(); };
  // The hub's answer is told to the volunteer here (the streamer's thread starts at once, with
  // the spool's rollouts: a callback set after construction would race it).
  RolloutStreamer streamer(
      [&](const net::RolloutSubmission& r) {
        net::RolloutResponse answer;
        try {
          answer = hub.submit(r);
        } catch (const std::exception& e) {
          if (is_unreachable(e)) gauges.hub.unreachable("submit", e.what());
          throw;
        }
        gauges.hub.answered();
        if (report) report->rollout_answered(r, answer);
        return answer;
      },
      session.state_path("spool"));
  if (report) {
    gauges.on_weights = [report](uint64_t version, bool anchor, double ms) {
      report->weights_applied(version, anchor, ms);
    };
    report->watch(gauges, [&sync] { return sync.last_error(); });
  }

  // ---- background threads: progress report, weight sync, heartbeat, peer checks ----
  // Declared after all they read: however generate_rollouts is left, they are stopped and joined
  // before the gauges, the sync and the book go.
  WorkerThreads threads(hub);
  if (report) threads.start([report](std::stop_token stop_report) { report->run(stop_report); });
  threads.start_hub_loop(
      [&](std::stop_token stop_sync) { run_weight_sync(sync, stop_sync, &gauges.hub); });
  threads.start_hub_loop([&](std::stop_token stop_beating) {
    run_heartbeat(hub, joined.worker_id, joined.heartbeat_interval_s, book, gauges, stop_beating);
  });
  if (o.peer_checks && j.room_for_checks) {
    // The task a check replays: this worker's own way to the run's task.
    verify::ReplayTaskMaker make_task =
        [&hub, &o, stop_strings = joined.stop_strings](
            const net::ValidationJob& job) -> std::unique_ptr<env::Task> {
      if (o.task_options.empty()) return std::make_unique<HubTask>(hub, job.task, stop_strings);
      const env::TaskRegistry& tasks = env::builtin_tasks();
      return tasks.make(
          job.task, tasks.with_local(job.task, env::TaskOptions(job.task_options), o.task_options));
    };
    CheckOptions check_options;
    check_options.mirror_dir = session.state_path("checks");
    threads.start([&hub, model = verify::ReplayModel{config, &codec, sample_vocab},
                   make_task = std::move(make_task),
                   check_options = std::move(check_options)](std::stop_token stop_checking) {
      run_peer_checks(hub, model, make_task, check_options, stop_checking);
    });
  }

  // ---- generation ----
  WorkerStats stats;
  const RolloutContext context{o, config, j.task, codec, sample_vocab, joined, session.pool()};
  run_rollout_loop(context, sync, hub, book, streamer, gauges, stop, stats);

  if (gauges.run_ended) {
    // The run is over: nothing finished now would be trained, and the hub is about to stop.
    if (report) report->run_ended();
    threads.stop();
    streamer.stop(false);
    stats.tokens_generated = gauges.tokens_generated;
    stats.idle_fraction = gauges.idle_fraction;
    stats.run_ended = true;
    log_info("worker", "the hub says the run is over: stopped after ", stats.rollouts_finished,
             " rollouts, ", stats.tokens_generated, " tokens");
    if (report) report->stopped(stats.tokens_generated, stats.idle_fraction);
    return stats;
  }
  // ---- clean shutdown: release what we did not finish, hand over what we did ----
  for (const auto& w : book.unfinished()) {
    try {
      hub.release(w->lease.lease_id);
      ++stats.leases_released;
    } catch (const std::exception& e) {
      log_warn("worker", "release ", w->lease.lease_id, ": ", e.what());
    }
  }
  if (report) report->stopping(o.shutdown_grace_s);
  streamer.stop(true, std::chrono::seconds(o.shutdown_grace_s));
  threads.stop();  // before the gauges are read for the last time
  stats.tokens_generated = gauges.tokens_generated;
  stats.idle_fraction = gauges.idle_fraction;
  const StreamCounters c = streamer.counters();
  log_info("worker", "stopped: ", stats.rollouts_finished, " rollouts (", c.accepted, " accepted, ",
           c.duplicate, " duplicate, ", c.rejected, " rejected, ", streamer.pending(),
           " left in the spool), ", stats.tokens_generated, " tokens, ", stats.weight_switches,
           " weight switches, idle ", stats.idle_fraction);
  if (report) report->stopped(stats.tokens_generated, stats.idle_fraction);
  return stats;
}

// A worker that cannot hold the whole model (stage_worker.h): asks the hub for a place in a
// pipeline group, holds it — the head generating as any worker, a later stage serving its span —
// while the hub keeps it, and asks again when the group is dissolved (a member gone).
WorkerStats run_group_member(const WorkerOptions& o, const Joined& j,
                             const std::atomic<bool>& stop) {
  WorkerStats total;
  // One key for this worker's commitments in every group it joins (core/stage_commitment.h).
  const SigningKey commit_key = SigningKey::generate();
  const PlaceAsk ask{j.memory_bytes, stage_port(o), o.stage_relayed,
                     bytes_hex(commit_key.public_key())};
  net::HubClient& hub = j.session.hub();
  const std::string hub_host = url_host(hub.http().base_url());
  while (!stop) {
    const std::optional<net::PipelinePlace> place = wait_for_place(hub, ask, stop);
    if (!place) break;
    WorkerOptions placed = placed_options(o, *place, hub_host, ask.port);
    placed.stage_commit_key = commit_key;
    const auto health = std::make_shared<GroupHealth>(place->group_id);
    placed.group_health = health;
    log_info("worker", "placed in pipeline group ", place->group_id, ": stage ", place->stage,
             " of ", place->stages, ", layers [", place->first_layer, ", ", place->last_layer, ")",
             place->next_key.empty() ? "" : ", the next stage through the hub's relay",
             place->next.empty() ? "" : ", the next stage at ", place->next,
             place->serve_key.empty() ? "" : ", served through the hub's relay");
    {
      PlaceWatch watch(hub, ask, place->group_id, stop, health.get());
      const WorkerStats s = place->stage == 0
                                ? generate_rollouts(placed, j, watch.leave())
                                : serve_stage(placed, j.session, j.config, watch.leave());
      total.rollouts_finished += s.rollouts_finished;
      total.tokens_generated += s.tokens_generated;
      total.weight_switches += s.weight_switches;
      total.leases += s.leases;
      total.leases_released += s.leases_released;
    }
    hub.http().clear_cancel();  // the role's threads cancelled their calls on the way out
    if (!stop) log_info("worker", "pipeline group ", place->group_id, " ended: asking again");
  }
  return total;
}

}  // namespace

WorkerStats run_worker(const WorkerOptions& o, const std::atomic<bool>& stop) {
  STOA_CHECK(!o.hub_url.empty() || !o.join_string.empty(), ErrorKind::kInvalidArgument,
             "stoa work: --join STRING (or --hub URL with --token) is required");
  STOA_CHECK(o.slots >= 1, ErrorKind::kInvalidArgument, "stoa work: --slots must be >= 1");
  if (o.stages > 1 && o.stage > 0) return run_stage_worker(o, stop);  // stage_worker.h
  std::optional<ProgressReport> report;
  if (o.progress) report.emplace();
  WorkerSession session(o, report ? &*report : nullptr);

  // The model's config and codec — the hub renders prompts and decodes transcripts by the same
  // rule (env/model_codec.h) — and room for the model before its weights are downloaded: the
  // int8 weights in memory and their download in the state dir. With --model before joining;
  // without, once the join reply has named the run's files and they are fetched.
  std::string model_dir = o.model_dir;
  ModelConfig config;
  env::ModelCodec model_codec;
  // Peer checks hold up to two more versions' weights (check_thread.h): taken only with room.
  bool room_for_checks = true;
  // Too small for the whole model but big enough for a stage: a pipeline group's member.
  bool group_member = false;
  uint64_t memory_bytes = 0;
  auto prepare_model = [&] {
    config = load_model_config(model_dir + "/config.json");
    model_codec = env::load_model_codec(model_dir, config, "stoa work");
    const MemoryNeed need =
        o.stages > 1 ? memory_needed(config, pipeline_span(config, o)) : memory_needed(config);
    const auto memory = session.memory_available();
    const auto disk = disk_free(session.state_dir());
    if (report) report->room_checked(need.total(), memory, need.weights_bytes, disk);
    memory_bytes = memory.value_or(0);
    group_member =
        o.stages == 1 && memory && *memory < need.total() && *memory >= smallest_stage_need(config);
    if (group_member)
      log_info("worker", "the model needs ", human_bytes(need.total()), ", this worker may use ",
               human_bytes(*memory), ": it will hold a share of it in a pipeline group");
    if (memory && !group_member) check_memory(need, *memory);
    // A group's head holds a share of the model: a check replays the whole of it.
    room_for_checks = o.stages == 1 && !group_member &&
                      (!memory || *memory >= need.total() + 2 * need.weights_bytes);
    if (o.peer_checks && !room_for_checks)
      log_warn("worker",
               o.stages > 1 ? "no peer checks: a check replays the whole model"
                            : "no peer checks: they need more memory than the model",
               " (", human_bytes(memory.value_or(0)), " available)");
    STOA_CHECK(!disk || *disk >= need.weights_bytes, ErrorKind::kIo, "not enough disk space in ",
               session.state_dir(), " for the model's download: it needs about ",
               human_bytes(need.weights_bytes), ", ", human_bytes(disk.value_or(0)), " is free");
  };
  if (!model_dir.empty()) prepare_model();

  // ---- join (resuming the previous identity when the state dir has one) ----
  const net::JoinResponse& joined = session.join(o.threads, stop);
  if (model_dir.empty()) {
    model_dir = session.model_dir();
    prepare_model();
  }
  session.check_vocabulary(config, model_dir);
  // The task the hub names. With options of this machine's own (where its tools are: an index,
  // a server) it is built here from the registry with the run's options — throwing, with the
  // tasks this worker knows, when the hub runs another one; without, the hub runs it for this
  // worker (hub_task.h) and nothing of the task is needed here.
  std::unique_ptr<env::Task> task_ptr;
  if (o.task_options.empty()) {
    task_ptr = std::make_unique<HubTask>(session.hub(), joined.task, joined.stop_strings);
  } else {
    const env::TaskRegistry& tasks = env::builtin_tasks();
    task_ptr = tasks.make(
        joined.task,
        tasks.with_local(joined.task, env::TaskOptions(joined.task_options), o.task_options));
  }

  const Joined j{session, config, model_codec, *task_ptr, room_for_checks, memory_bytes};
  if (!group_member) return generate_rollouts(o, j, stop);
  return run_group_member(o, j, stop);
}

}  // namespace stoa::worker
