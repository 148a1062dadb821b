#include "roles/hub/ledger/ledger_writer.h"

#include <chrono>

#include "core/error.h"
#include "core/log.h"

namespace stoa::hub {

namespace {
// A batch that fails to commit (SQLITE_BUSY after the 5 s busy timeout: another process held
// the write lock; a transient I/O error) was rolled back whole, so it can be retried as is.
constexpr int kCommitAttempts = 3;
}  // namespace

LedgerWriter::LedgerWriter(const std::string& path, size_t max_pending)
    : ledger_(path), max_pending_(max_pending == 0 ? 1 : max_pending) {
  thread_ = std::thread([this] { loop(); });
}

LedgerWriter::~LedgerWriter() {
  stop();
}

uint64_t LedgerWriter::enqueue(Write write) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t ticket = ++last_ticket_;
  queue_.push_back({ticket, std::move(write)});
  work_cv_.notify_one();
  return ticket;
}

bool LedgerWriter::has_room() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_.empty() && last_ticket_ - durable_ticket_ < max_pending_;
}

size_t LedgerWriter::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(last_ticket_ - durable_ticket_);
}

uint64_t LedgerWriter::last_ticket() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_ticket_;
}

uint64_t LedgerWriter::durable_ticket() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return durable_ticket_;
}

void LedgerWriter::wait_durable(uint64_t ticket) const {
  std::unique_lock<std::mutex> lock(mutex_);
  durable_cv_.wait(lock, [&] { return durable_ticket_ >= ticket || !failure_.empty(); });
  if (durable_ticket_ < ticket) {
    fail(ErrorKind::kIo, "ledger ", ledger_.path(), ": the write was not committed (", failure_,
         "); restart the hub");
  }
}

std::string LedgerWriter::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void LedgerWriter::set_on_commit(std::function<void()> on_commit) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_commit_ = std::move(on_commit);
}

LedgerWriterStats LedgerWriter::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  LedgerWriterStats s = stats_;
  s.pending = last_ticket_ - durable_ticket_;
  return s;
}

void LedgerWriter::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LedgerWriter::commit_batch(std::deque<Queued>& batch) {
  for (int attempt = 1; attempt <= kCommitAttempts; ++attempt) {
    try {
      ledger_.transaction([&] {
        for (auto& q : batch) q.write(ledger_);
      });
      return true;
    } catch (const std::exception& e) {
      std::string why = e.what();
      log_error("hub", "ledger group commit of ", batch.size(), " writes failed (attempt ", attempt,
                " of ", kCommitAttempts, "): ", why);
      if (attempt == kCommitAttempts) {
        std::lock_guard<std::mutex> lock(mutex_);
        failure_ = why;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100 * attempt));
    }
  }
  return false;
}

void LedgerWriter::loop() {
  for (;;) {
    std::deque<Queued> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is committed
      batch.swap(queue_);
      if (!failure_.empty()) continue;  // fail-stop: nothing is written any more
    }
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = commit_batch(batch);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::function<void()> on_commit;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ok) {
        durable_ticket_ = batch.back().ticket;
        stats_.writes += batch.size();
        stats_.commits++;
        stats_.largest_batch = std::max<uint64_t>(stats_.largest_batch, batch.size());
        stats_.commit_seconds += seconds;
        stats_.slowest_commit_seconds = std::max(stats_.slowest_commit_seconds, seconds);
      }
      on_commit = on_commit_;
    }
    durable_cv_.notify_all();
    if (ok && on_commit) on_commit();
  }
}

}  // namespace stoa::hub
