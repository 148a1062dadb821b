#include "roles/worker/rollout_streamer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <span>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_bytes.h"
#include "core/log.h"

namespace stoa::worker {
namespace fs = std::filesystem;

RolloutStreamer::RolloutStreamer(Submit submit, std::string spool_dir,
                                 std::chrono::milliseconds backoff_base,
                                 std::chrono::milliseconds backoff_max)
    : submit_(std::move(submit)),
      spool_dir_(std::move(spool_dir)),
      backoff_base_(backoff_base),
      backoff_max_(backoff_max) {
  if (!spool_dir_.empty()) {
    fs::create_directories(spool_dir_);
    // Resume: rollouts a previous run finished but could not hand over. Oldest first, so the
    // least stale go out before the staleness window closes on them.
    std::vector<fs::directory_entry> files;
    for (const auto& entry : fs::directory_iterator(spool_dir_))
      if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry);
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
      return a.last_write_time() < b.last_write_time();
    });
    for (const auto& entry : files) {
      try {
        std::vector<uint8_t> bytes = read_file(entry.path().string());
        nlohmann::json j =
            net::parse_body(std::string(bytes.begin(), bytes.end()), entry.path().string());
        net::RolloutSubmission r = net::rollout_submission_from_json(j);
        net::validate_structure(r);
        queue_.push_back(std::move(r));
        ++counters_.resumed;
      } catch (const std::exception& e) {
        // A half-written spool file cannot exist (atomic writes); anything unreadable was put
        // there by someone else: set it aside rather than loop on it.
        log_warn("worker", "spool: ", entry.path().string(), " unreadable (", e.what(),
                 "); renamed to .bad");
        fs::rename(entry.path(), entry.path().string() + ".bad");
      }
    }
    if (counters_.resumed) log_info("worker", "spool: re-sending ", counters_.resumed, " rollouts");
  }
  thread_ = std::thread([this] { run(); });
}

RolloutStreamer::~RolloutStreamer() {
  stop(false);
}

void RolloutStreamer::spool_write(const net::RolloutSubmission& rollout) {
  if (spool_dir_.empty()) return;
  const std::string body = net::to_json(rollout).dump();
  write_file_atomic(
      (fs::path(spool_dir_) / (rollout.id + ".json")).string(),
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(body.data()), body.size()));
}

void RolloutStreamer::spool_remove(const std::string& id) {
  if (spool_dir_.empty()) return;
  std::error_code ec;
  fs::remove(fs::path(spool_dir_) / (id + ".json"), ec);
}

void RolloutStreamer::push(const net::RolloutSubmission& rollout) {
  net::validate_structure(rollout);
  spool_write(rollout);  // durable before it is queued: a crash after this still delivers it
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(rollout);
    ++counters_.queued;
  }
  cv_.notify_all();
}

size_t RolloutStreamer::pending() const {
  std::lock_guard lock(mutex_);
  return queue_.size() + (in_flight_ ? 1 : 0);
}

StreamCounters RolloutStreamer::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

bool RolloutStreamer::flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return idle_cv_.wait_for(lock, timeout, [&] { return queue_.empty() && !in_flight_; });
}

void RolloutStreamer::stop(bool drain, std::chrono::milliseconds drain_timeout) {
  if (drain) flush(drain_timeout);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RolloutStreamer::run() {
  int failures = 0;
  std::unique_lock lock(mutex_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    net::RolloutSubmission rollout = queue_.front();
    queue_.pop_front();
    in_flight_ = true;
    lock.unlock();
    bool delivered = false;
    net::RolloutResponse response;
    try {
      response = submit_(rollout);
      delivered = true;
    } catch (const std::exception& e) {
      // The first failure of a spell is a warning; its retries (the hub may be away for long)
      // go to the detailed log.
      if (failures == 0)
        log_warn("worker", "rollout ", rollout.id, ": submit failed (", e.what(),
                 "); keeping it queued");
      else
        log_info("worker", "rollout ", rollout.id, ": submit failed again (", e.what(), ")");
    }
    if (delivered) {
      failures = 0;
      spool_remove(rollout.id);
      if (response.status == net::IntakeStatus::kRejected)
        log_warn("worker", "rollout ", rollout.id, " rejected: ", response.reason, " ",
                 response.detail);
      if (on_result_) on_result_(rollout, response);
    }
    lock.lock();
    in_flight_ = false;
    if (delivered) {
      switch (response.status) {
        case net::IntakeStatus::kAccepted:
          ++counters_.accepted;
          counters_.reward_sum += response.reward;
          break;
        case net::IntakeStatus::kDuplicate:
          ++counters_.duplicate;
          break;
        case net::IntakeStatus::kRejected:
          ++counters_.rejected;
          break;
      }
    } else {
      ++counters_.transport_failures;
      queue_.push_front(std::move(rollout));  // same id: the retry is idempotent on the hub
      const std::chrono::milliseconds wait =
          std::min(backoff_max_, backoff_base_ * (int64_t{1} << std::min(failures, 16)));
      ++failures;
      cv_.wait_for(lock, wait, [&] { return stopping_; });
    }
    if (queue_.empty() && !in_flight_) idle_cv_.notify_all();
  }
}

}  // namespace stoa::worker
