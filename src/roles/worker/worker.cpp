#include "roles/worker/worker.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "env/model_codec.h"
#include "env/tasks/builtin_tasks.h"
#include "net/hub_client.h"
#include "pulse/model_view.h"
#include "roles/worker/check_thread.h"
#include "roles/worker/failure_advice.h"
#include "roles/worker/heartbeat.h"
#include "roles/worker/hub_task.h"
#include "roles/worker/join.h"
#include "roles/worker/lease_book.h"
#include "roles/worker/memory_check.h"
#include "roles/worker/progress_report.h"
#include "roles/worker/rollout_loop.h"
#include "roles/worker/rollout_streamer.h"
#include "roles/worker/run_files.h"
#include "roles/worker/stage_worker.h"
#include "roles/worker/swarm_source.h"
#include "roles/worker/sync_thread.h"
#include "roles/worker/weight_sync.h"

namespace stoa::worker {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Leaving run_worker by an exception stops the background threads (whose destructors then join
// them); cancelling the hub client ends their calls in flight at once.
class StopThreadsOnThrow {
 public:
  StopThreadsOnThrow(std::atomic<bool>& stop, net::HubClient& hub) : stop_(stop), hub_(hub) {}
  ~StopThreadsOnThrow() {
    if (!armed_) return;
    stop_ = true;
    hub_.http().cancel();
  }
  StopThreadsOnThrow(const StopThreadsOnThrow&) = delete;
  StopThreadsOnThrow& operator=(const StopThreadsOnThrow&) = delete;
  void disarm() { armed_ = false; }

 private:
  std::atomic<bool>& stop_;
  net::HubClient& hub_;
  bool armed_ = true;
};
class StopReportOnExit {
 public:
  explicit StopReportOnExit(std::optional<ProgressReport>& report) : report_(report) {}
  ~StopReportOnExit() {
    if (report_) report_->stop();
  }
  StopReportOnExit(const StopReportOnExit&) = delete;
  StopReportOnExit& operator=(const StopReportOnExit&) = delete;

 private:
  std::optional<ProgressReport>& report_;
};

// What a joined worker generates with (run_worker's, for generate_rollouts and the group loop).
struct Joined {
  net::HubClient& hub;
  const net::JoinResponse& joined;
  const ModelConfig& config;
  const env::ModelCodec& model_codec;
  const env::Task& task;
  ThreadPool* pool;
  std::string state_dir;
  std::optional<ProgressReport>& report;
  bool room_for_checks;
  uint64_t memory_bytes;  // what this worker may use (a group member says it to the hub)
};

// Joined, with the model and the task: the weight sync, the heartbeat, the streamer, the checks
// and the rollout loop until `stop`, then a clean shutdown.
WorkerStats generate_rollouts(const WorkerOptions& o, const Joined& j,
                              const std::atomic<bool>& stop) {
  net::HubClient& hub = j.hub;
  const net::JoinResponse& joined = j.joined;
  const ModelConfig& config = j.config;
  const env::Task& task = j.task;
  ThreadPool* pool = j.pool;
  const std::string& state_dir = j.state_dir;
  std::optional<ProgressReport>& report = j.report;
  const bool room_for_checks = j.room_for_checks;
  const int64_t sample_vocab = j.model_codec.sample_vocab;
  const env::TokenCodec& codec = *j.model_codec.codec;
  // ---- background threads: weight sync, heartbeat, rollout streamer ----
  // Blobs download to <state dir>/blobs and resume from there (after a drop or a restart).
  HubBlobSource hub_source(hub, (fs::path(state_dir) / "blobs").string());
  std::unique_ptr<SwarmBlobSource> swarm_source = make_swarm_source(o, hub, hub_source, state_dir);
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
  // The hub's answer is told to the volunteer here (the streamer's thread starts at once, with
  // the spool's rollouts: a callback set after construction would race it).
  RolloutStreamer streamer(
      [&](const net::RolloutSubmission& r) {
        net::RolloutResponse answer = hub.submit(r);
        if (report) report->rollout_answered(r, answer);
        return answer;
      },
      (fs::path(state_dir) / "spool").string());
  if (report) {
    gauges.on_weights = [&report](uint64_t version, bool anchor, double ms) {
      report->weights_applied(version, anchor, ms);
    };
    report->start(gauges, [&sync] { return sync.last_error(); });
  }
  // The report's thread reads the gauges and the sync: it stops before they go, however
  // run_worker is left.
  StopReportOnExit stop_report_on_exit(report);
  std::atomic<bool> threads_stop{false};
  std::atomic<int> threads_done{0};  // sync + heartbeat, for a bounded shutdown
  SyncThread sync_thread(sync, threads_stop, threads_done);
  HeartbeatThread heartbeat_thread(hub, joined.worker_id, joined.heartbeat_interval_s, book, gauges,
                                   threads_stop, threads_done);
  std::unique_ptr<CheckThread> check_thread;
  if (o.peer_checks && room_for_checks) {
    // The task a check replays: this worker's own way to the run's task.
    auto make_task = [&hub, &o, stop_strings = joined.stop_strings](
                         const net::ValidationJob& job) -> std::unique_ptr<env::Task> {
      if (o.task_options.empty()) return std::make_unique<HubTask>(hub, job.task, stop_strings);
      const env::TaskRegistry& tasks = env::builtin_tasks();
      return tasks.make(
          job.task, tasks.with_local(job.task, env::TaskOptions(job.task_options), o.task_options));
    };
    CheckOptions check_options;
    check_options.mirror_dir = (fs::path(state_dir) / "checks").string();
    check_thread =
        std::make_unique<CheckThread>(hub, verify::ReplayModel{config, &codec, sample_vocab},
                                      make_task, check_options, threads_stop);
  }
  StopThreadsOnThrow stop_threads_on_throw(threads_stop, hub);

  // ---- generation ----
  WorkerStats stats;
  const RolloutContext context{o, config, task, codec, sample_vocab, joined, pool};
  run_rollout_loop(context, sync, hub, book, streamer, gauges, stop, stats);

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
  threads_stop = true;
  // A live hub answers the sync's long-poll within its 5 s; a dead one would keep the threads
  // in their retries: past that, cancel them (after, so a clean stop logs no cancelled calls).
  for (int i = 0; i < 130 && threads_done < 2; ++i) std::this_thread::sleep_for(50ms);
  if (threads_done < 2) hub.http().cancel();
  sync_thread.join();
  heartbeat_thread.join();
  if (check_thread) check_thread->join();
  stop_threads_on_throw.disarm();
  stats.tokens_generated = gauges.tokens_generated;
  stats.idle_fraction = gauges.idle_fraction;
  const StreamCounters c = streamer.counters();
  log_info("worker", "stopped: ", stats.rollouts_finished, " rollouts (", c.accepted, " accepted, ",
           c.duplicate, " duplicate, ", c.rejected, " rejected, ", streamer.pending(),
           " left in the spool), ", stats.tokens_generated, " tokens, ", stats.weight_switches,
           " weight switches, idle ", stats.idle_fraction);
  if (report) {
    report->stop();
    report->stopped(stats.tokens_generated, stats.idle_fraction);
  }
  return stats;
}

// A worker that cannot hold the whole model (stage_worker.h): asks the hub for a place in a
// pipeline group, holds it — the head generating as any worker, a later stage serving its span —
// while the hub keeps it, and asks again when the group is dissolved (a member gone).
WorkerStats run_group_member(const WorkerOptions& o, const Joined& j,
                             const std::atomic<bool>& stop) {
  WorkerStats total;
  const PlaceAsk ask{j.memory_bytes, stage_port(o), o.stage_relayed};
  const std::string hub_host = url_host(j.hub.http().base_url());
  while (!stop) {
    const std::optional<net::PipelinePlace> place = wait_for_place(j.hub, ask, stop);
    if (!place) break;
    const WorkerOptions placed = placed_options(o, *place, hub_host, ask.port);
    log_info("worker", "placed in pipeline group ", place->group_id, ": stage ", place->stage,
             " of ", place->stages, ", layers [", place->first_layer, ", ", place->last_layer, ")",
             place->next_key.empty() ? "" : ", the next stage through the hub's relay",
             place->next.empty() ? "" : ", the next stage at ", place->next,
             place->serve_key.empty() ? "" : ", served through the hub's relay");
    {
      PlaceWatch watch(j.hub, ask, place->group_id, stop);
      const WorkerStats s = place->stage == 0
                                ? generate_rollouts(placed, j, watch.leave())
                                : serve_stage(placed, j.hub, j.joined, j.config, watch.leave());
      total.rollouts_finished += s.rollouts_finished;
      total.tokens_generated += s.tokens_generated;
      total.weight_switches += s.weight_switches;
      total.leases += s.leases;
      total.leases_released += s.leases_released;
    }
    j.hub.http().clear_cancel();  // the role's threads cancelled their calls on the way out
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
  std::unique_ptr<ThreadPool> own_pool;
  if (o.threads > 0) own_pool = std::make_unique<ThreadPool>(o.threads);
  ThreadPool* pool = own_pool ? own_pool.get() : &ThreadPool::global();
  const std::string state_dir = o.state_dir.empty() ? (".stoa-worker-" + o.name) : o.state_dir;
  std::optional<ProgressReport> report;
  if (o.progress) report.emplace();
  fs::create_directories(state_dir);

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
    const auto memory = memory_available(
        o.max_memory_mb > 0 ? std::optional<uint64_t>(static_cast<uint64_t>(o.max_memory_mb * 1e6))
                            : std::nullopt);
    const auto disk = disk_free(state_dir);
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
               state_dir, " for the model's download: it needs about ",
               human_bytes(need.weights_bytes), ", ", human_bytes(disk.value_or(0)), " is free");
  };
  if (!model_dir.empty()) prepare_model();

  // ---- join (resuming the previous identity when the state dir has one) ----
  const HubTarget target = hub_target(o.hub_url, o.join_token, o.join_string);
  const std::string& hub_url = target.url;
  const std::string& join_token = target.join_token;
  const net::HttpClientOptions& http_options = target.http;
  net::HubClient hub(hub_url, http_options);
  if (report) report->connecting(hub_url, http_options.pin_sha256);
  bool resumed = false;
  const net::JoinResponse joined = join_hub(
      hub, join_token, o.name, o.threads, state_dir, o.join_timeout_s, stop,
      [&](const std::exception& why) {
        if (report) report->join_retry(advise(why, hub_url).what, o.join_timeout_s);
      },
      &resumed);
  if (report)
    report->joined(joined.worker_id, o.name, resumed, joined.task,
                   !http_options.pin_sha256.empty());
  if (model_dir.empty()) {
    const RunFilesFetched files =
        fetch_run_files(hub, joined.run_files, (fs::path(state_dir) / "model").string());
    log_info("worker", "the run's model files in ", files.dir, " (", files.bytes_fetched,
             " bytes fetched)");
    model_dir = files.dir;
    prepare_model();
  }
  STOA_CHECK(joined.vocab_size == config.vocab_size, ErrorKind::kInvalidArgument,
             "stoa work: the hub's vocabulary has ", joined.vocab_size, " tokens, ", model_dir,
             " has ", config.vocab_size);
  // The task the hub names. With options of this machine's own (where its tools are: an index,
  // a server) it is built here from the registry with the run's options — throwing, with the
  // tasks this worker knows, when the hub runs another one; without, the hub runs it for this
  // worker (hub_task.h) and nothing of the task is needed here.
  std::unique_ptr<env::Task> task_ptr;
  if (o.task_options.empty()) {
    task_ptr = std::make_unique<HubTask>(hub, joined.task, joined.stop_strings);
  } else {
    const env::TaskRegistry& tasks = env::builtin_tasks();
    task_ptr = tasks.make(
        joined.task,
        tasks.with_local(joined.task, env::TaskOptions(joined.task_options), o.task_options));
  }
  const env::Task& task = *task_ptr;

  const Joined j{hub,  joined,    config, model_codec,     task,
                 pool, state_dir, report, room_for_checks, memory_bytes};
  if (!group_member) return generate_rollouts(o, j, stop);
  return run_group_member(o, j, stop);
}

}  // namespace stoa::worker
