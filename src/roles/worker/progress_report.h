// What `stoa work` tells a volunteer, in plain words, one line per event (readable in a
// terminal and in a file): connecting to the hub and whether its certificate matched the pin,
// the model download (bytes / total, rate, time left, every 5 s or 10 %), each version of the
// weights taken (full model or patch, and how long applying it took), the generation rate
// (tokens/s over the last 30 s) with rollouts sent / accepted / rejected (each rejection with its
// reason in words), when the worker waits for work, when the hub cannot be reached (one line
// when it goes, one when it is back, a reminder after a long absence; no generation line
// meanwhile) and when the hub says the run is over. The detailed log (core/log.h) stays
// on stderr for `--verbose`.
//
// Fed by what the worker already has: events from worker.cpp / join.cpp / the rollout loop
// (WorkerGauges::on_weights), the hub's answers to submitted rollouts, and a loop (a thread of
// WorkerThreads) that polls the gauges (download progress, tokens generated, rollouts running)
// once a second.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

#include "net/protocol.h"
#include "roles/worker/heartbeat.h"
#include "roles/worker/token_rate.h"

namespace stoa::worker {

class ProgressReport {
 public:
  using Clock = std::chrono::steady_clock;
  using Sink = std::function<void(const std::string& line)>;

  // sink: where each line goes (default: stdout, flushed per line).
  explicit ProgressReport(Sink sink = {});
  ProgressReport(const ProgressReport&) = delete;
  ProgressReport& operator=(const ProgressReport&) = delete;

  // ---- events (any thread) ----
  void connecting(const std::string& url, const std::string& pin_sha256);
  void join_retry(const std::string& why, int timeout_s);
  void joined(const std::string& worker_id, const std::string& name, bool resumed,
              const std::string& task, bool pinned);
  void room_checked(uint64_t memory_needed, std::optional<uint64_t> memory_available,
                    uint64_t disk_needed, std::optional<uint64_t> disk_free);
  void weights_applied(uint64_t version, bool anchor, double apply_ms);
  void rollout_answered(const net::RolloutSubmission& rollout,
                        const net::RolloutResponse& response);
  void sync_problem(const std::string& why);
  void run_ended();
  void stopping(int grace_s);
  void stopped(uint64_t tokens, double idle_fraction);

  // ---- polled state: run() calls tick() once a second (tests call it with their clock) ----
  // sync_error: the weight sync's last error ("" when none), watched for a full disk. Both must
  // outlive run() (its thread stops before they go: worker_threads.h).
  void watch(const WorkerGauges& gauges, std::function<std::string()> sync_error = {});
  void run(std::stop_token stop);
  void tick(Clock::time_point now);

  uint64_t sent() const { return sent_; }
  uint64_t accepted() const { return accepted_; }
  uint64_t rejected() const { return rejected_; }

 private:
  void say(const std::string& line);
  void report_download(Clock::time_point now);

  Sink sink_;
  std::mutex say_mutex_;
  const WorkerGauges* gauges_ = nullptr;
  std::function<std::string()> sync_error_;
  RollingRate rate_{std::chrono::seconds(30)};
  std::atomic<uint64_t> sent_{0}, accepted_{0}, rejected_{0};
  // tick() state (the report thread only)
  std::optional<net::BlobDownload> last_download_;
  Clock::time_point last_download_line_{};
  int last_download_tenth_ = -1;
  Clock::time_point download_started_{};
  Clock::time_point next_status_{};
  Clock::time_point idle_since_{};
  bool idle_said_ = false;
  bool waiting_first_said_ = false;
  Clock::time_point last_retry_line_{};
  std::string last_sync_problem_;
  void report_contact(Clock::time_point now);
  bool hub_away_ = false;   // the last call to the hub did not reach it
  bool away_said_ = false;  // the line that the hub cannot be reached was said
  Clock::time_point away_since_{};
  Clock::time_point next_away_reminder_{};
};

// "3 min 20 s", "45 s", "2 h 5 min".
std::string human_duration(double seconds);

}  // namespace stoa::worker
