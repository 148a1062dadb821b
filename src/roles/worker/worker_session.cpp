#include "roles/worker/worker_session.h"

#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "roles/worker/failure_advice.h"
#include "roles/worker/memory_check.h"
#include "roles/worker/run_files.h"

namespace stoa::worker {
namespace fs = std::filesystem;

namespace {

std::string state_dir_of(const WorkerOptions& o) {
  const std::string dir = o.state_dir.empty() ? (".stoa-worker-" + o.name) : o.state_dir;
  fs::create_directories(dir);
  return dir;
}

}  // namespace

WorkerSession::WorkerSession(const WorkerOptions& options, ProgressReport* report)
    : options_(options),
      report_(report),
      state_dir_(state_dir_of(options)),
      target_(hub_target(options.hub_url, options.join_token, options.join_string)),
      hub_(target_.url, target_.http) {}

std::string WorkerSession::state_path(const std::string& name) const {
  return (fs::path(state_dir_) / name).string();
}

const net::JoinResponse& WorkerSession::join(int engine_threads, const std::atomic<bool>& stop) {
  if (report_) report_->connecting(target_.url, target_.http.pin_sha256);
  // With a report the volunteer reads each retry in words (and the log keeps it at info level).
  std::function<void(const std::exception&)> on_retry;
  if (report_)
    on_retry = [this](const std::exception& why) {
      report_->join_retry(advise(why, target_.url).what, options_.join_timeout_s);
    };
  bool resumed = false;
  joined_ = join_hub(hub_, target_.join_token, options_.name, engine_threads, state_dir_,
                     options_.join_timeout_s, stop, on_retry, &resumed);
  if (report_)
    report_->joined(joined_->worker_id, options_.name, resumed, joined_->task, hub_pinned());
  return *joined_;
}

const net::JoinResponse& WorkerSession::joined() const {
  STOA_CHECK(joined_.has_value(), ErrorKind::kInvalidArgument, "the worker has not joined yet");
  return *joined_;
}

std::string WorkerSession::model_dir() {
  if (!options_.model_dir.empty()) return options_.model_dir;
  const RunFilesFetched files = fetch_run_files(hub_, joined().run_files, state_path("model"));
  log_info("worker", "the run's model files in ", files.dir, " (", files.bytes_fetched,
           " bytes fetched)");
  return files.dir;
}

void WorkerSession::check_vocabulary(const ModelConfig& config,
                                     const std::string& model_dir) const {
  const net::JoinResponse& j = joined();
  STOA_CHECK(j.vocab_size == config.vocab_size, ErrorKind::kInvalidArgument,
             "stoa work: the hub's vocabulary has ", j.vocab_size, " tokens, ", model_dir, " has ",
             config.vocab_size);
}

std::optional<uint64_t> WorkerSession::memory_available() const {
  return worker::memory_available(
      options_.max_memory_mb > 0
          ? std::optional<uint64_t>(static_cast<uint64_t>(options_.max_memory_mb * 1e6))
          : std::nullopt);
}

ThreadPool* WorkerSession::pool() {
  if (options_.threads <= 0) return &ThreadPool::global();
  if (!own_pool_) own_pool_ = std::make_unique<ThreadPool>(options_.threads);
  return own_pool_.get();
}

}  // namespace stoa::worker
