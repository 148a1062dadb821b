// Group commit of the hub's ledger (docs/design/hub.md "Group commit"). The hub queues each
// write — a function of a Ledger that is one atomic unit (a rollout with its group's and lease's
// changes, a new group with the prompt cursor, ...) — under its own mutex, in the order its memory
// changed, and gets a ticket. One writer thread, on its own SQLite connection, commits everything
// that queued up while the previous commit's fsync ran as ONE transaction: N concurrent writes
// cost one fsync, not N, and no fsync runs under the hub's mutex. A request answers only after
// wait_durable(its ticket), outside the hub's mutex: "accepted" still means "on disk".
//
// Writes commit in ticket order and a batch commits whole or not at all, so what survives a crash
// is always a prefix of what was queued — the same states the one-transaction-per-request ledger
// could crash into. A batch that cannot commit is retried; if it still fails (I/O error, disk
// full) the hub's memory is ahead of its ledger, so the writer stops for good (fail-stop): every
// waiter and every later write fails with kIo until the hub is restarted from the ledger.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "roles/hub/ledger/ledger.h"

namespace stoa::hub {

struct LedgerWriterStats {
  uint64_t writes = 0;         // writes committed
  uint64_t commits = 0;        // transactions (one fsync each)
  uint64_t largest_batch = 0;  // writes in the largest transaction
  uint64_t pending = 0;        // queued or committing now
  double commit_seconds = 0;   // wall time inside BEGIN..COMMIT, fsync included
  double slowest_commit_seconds = 0;
};

class LedgerWriter {
 public:
  using Write = std::function<void(Ledger&)>;

  // Opens its own connection to the ledger at `path` (already created and migrated).
  // `max_pending` is where has_room() turns false (the hub's back-pressure).
  LedgerWriter(const std::string& path, size_t max_pending);
  ~LedgerWriter();  // stop()
  LedgerWriter(const LedgerWriter&) = delete;
  LedgerWriter& operator=(const LedgerWriter&) = delete;

  // Queues `write` and returns its ticket (1, 2, ...). Never blocks and never refuses: callers
  // check has_room() first, so the queue exceeds max_pending by at most one request's writes.
  uint64_t enqueue(Write write);
  // Fewer than max_pending writes wait, and the writer has not failed.
  bool has_room() const;
  size_t pending() const;
  // The newest ticket handed out (0: none yet).
  uint64_t last_ticket() const;
  // Every write up to this ticket is committed.
  uint64_t durable_ticket() const;
  // Blocks until `ticket` is committed; throws kIo if the writer failed first.
  void wait_durable(uint64_t ticket) const;
  // Non-empty once the writer has failed for good (fail-stop): why.
  std::string failure() const;
  // Called on the writer thread after every commit, with no writer lock held.
  void set_on_commit(std::function<void()> on_commit);
  LedgerWriterStats stats() const;
  // Commits what is queued, then joins the thread. Idempotent.
  void stop();

 private:
  struct Queued {
    uint64_t ticket;
    Write write;
  };
  void loop();
  bool commit_batch(std::deque<Queued>& batch);

  Ledger ledger_;
  size_t max_pending_;
  mutable std::mutex mutex_;
  std::condition_variable work_cv_;
  mutable std::condition_variable durable_cv_;
  std::deque<Queued> queue_;
  uint64_t last_ticket_ = 0;
  uint64_t durable_ticket_ = 0;
  std::string failure_;
  bool stopping_ = false;
  LedgerWriterStats stats_;
  std::function<void()> on_commit_;
  std::thread thread_;
};

}  // namespace stoa::hub
