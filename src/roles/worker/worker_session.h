// What every kind of `stoa work` does before its own work and holds while it does it — the whole
// model's worker (worker.h), a later stage of a pipeline group (stage_worker.h) and the sync-only
// worker (sync_only.h): the state directory, the hub's client, the join that resumes the identity
// kept in that directory (join.h), the run's model files (run_files.h), the memory this process
// may use (memory_check.h) and the engine's thread pool.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/thread_pool.h"
#include "model/config.h"
#include "net/hub_client.h"
#include "roles/worker/join.h"
#include "roles/worker/progress_report.h"
#include "roles/worker/worker.h"

namespace stoa::worker {

class WorkerSession {
 public:
  // Creates the state directory (--state-dir; default .stoa-worker-<name>) and the hub's client
  // (--join, or --hub and --token); nothing is sent yet. `report`, when given, tells the
  // volunteer of the connection and the join; it must outlive the session.
  explicit WorkerSession(const WorkerOptions& options, ProgressReport* report = nullptr);
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  const std::string& state_dir() const { return state_dir_; }
  // <state dir>/<name>: where this worker keeps its blobs, spool, checks and model files.
  std::string state_path(const std::string& name) const;
  const std::string& hub_url() const { return target_.url; }
  bool hub_pinned() const { return !target_.http.pin_sha256.empty(); }
  net::HubClient& hub() { return hub_; }
  ProgressReport* report() const { return report_; }

  // Joins the hub as join_hub does (retrying an unreachable hub for --join-timeout, throwing
  // net::JoinRefused on a refusal), telling it the engine runs `engine_threads` threads.
  const net::JoinResponse& join(int engine_threads, const std::atomic<bool>& stop);
  const net::JoinResponse& joined() const;  // after join()

  // --model, or else (after join()) the run's files fetched from the hub into
  // <state dir>/model: a restart downloads only what changed.
  std::string model_dir();
  // kInvalidArgument when the model in `model_dir` is not the hub's (after join()): its
  // vocabulary differs, and every token id would mean something else.
  void check_vocabulary(const ModelConfig& config, const std::string& model_dir) const;

  // What this process may use (memory_check.h), lowered by --max-memory; nullopt when unknown.
  std::optional<uint64_t> memory_available() const;

  // --threads' pool, made on first use, or the global pool's default.
  ThreadPool* pool();

 private:
  const WorkerOptions& options_;
  ProgressReport* report_;
  std::string state_dir_;
  HubTarget target_;
  net::HubClient hub_;
  std::optional<net::JoinResponse> joined_;
  std::unique_ptr<ThreadPool> own_pool_;
};

}  // namespace stoa::worker
