// The hub's ledger as the hub uses it: a reader connection (read under the hub's lock), the
// group commit its writes go through (ledger_writer.h), and what the group commit still holds.
// An accepted rollout whose write is queued but not yet durable is invisible to the reader, so
// rollout() and rollouts_of_group() look in both; a group completed by a write not yet durable
// is not handed to the trainer (durable()). Not thread-safe except where said: the Hub calls it
// under its lock; the writer's thread calls on_commit (given at start()) after each commit.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "roles/hub/ledger/ledger.h"
#include "roles/hub/ledger/ledger_writer.h"

namespace stoa::hub {

class RunLedger {
 public:
  // Opens (creates, migrates) the ledger at `path` for reading; writes need start().
  RunLedger(const std::string& path, size_t max_pending_writes);
  ~RunLedger();
  // Starts the group commit (after the hub restored its memory from reader()).
  void start(std::function<void()> on_commit);
  // Commits what is still queued and stops the writer. Idempotent; before the hub's state goes.
  void stop();

  Ledger& reader() { return *reader_; }
  const Ledger& reader() const { return *reader_; }

  // A request that will write checks first: RequestError 503 (Retry-After 1 s, counted in busy())
  // when max_pending_writes wait for the disk; Error kIo once the writer has failed for good.
  void reserve();
  // Queues one atomic write (several ledger calls commit together); returns its ticket.
  uint64_t write(LedgerWriter::Write write);
  // The ticket covering every write queued so far: a request waits for it outside the lock.
  uint64_t written() const { return writer_->last_ticket(); }
  void wait_durable(uint64_t ticket) const { writer_->wait_durable(ticket); }  // thread-safe
  uint64_t durable() const { return writer_->durable_ticket(); }
  LedgerWriterStats stats() const { return writer_->stats(); }
  int64_t busy() const { return busy_; }

  // An accepted rollout queued in `ticket`: read from here until that write is durable.
  void hold_rollout(std::shared_ptr<const RolloutRow> row, uint64_t ticket);
  // A group completed by `ticket`.
  void hold_completion(uint64_t ticket);
  // After a commit (the hub's lock held): forgets what is now durable; true when a held
  // completion became durable (the trainer may take its group).
  bool forget_durable();

  // The ledger's rows plus the accepted rollouts still in the group commit's queue.
  std::optional<RolloutRow> rollout(const std::string& id) const;
  std::vector<RolloutRow> rollouts_of_group(const std::string& group_id) const;

 private:
  struct HeldRollout {
    std::shared_ptr<const RolloutRow> row;
    uint64_t ticket = 0;
  };
  std::string path_;
  size_t max_pending_writes_;
  std::unique_ptr<Ledger> reader_;
  std::unique_ptr<LedgerWriter> writer_;
  std::map<std::string, HeldRollout> held_rollouts_;  // by rollout id
  std::deque<uint64_t> completion_tickets_;           // groups completed, not yet durable
  int64_t busy_ = 0;                                  // 503s: the disk was behind
};

}  // namespace stoa::hub
