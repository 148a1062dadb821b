#include "roles/hub/ledger/run_ledger.h"

#include <algorithm>

#include "roles/hub/request_error.h"

namespace stoa::hub {

RunLedger::RunLedger(const std::string& path, size_t max_pending_writes)
    : path_(path),
      max_pending_writes_(max_pending_writes),
      reader_(std::make_unique<Ledger>(path)) {}

RunLedger::~RunLedger() {
  stop();
}

void RunLedger::start(std::function<void()> on_commit) {
  writer_ = std::make_unique<LedgerWriter>(path_, max_pending_writes_);
  writer_->set_on_commit(std::move(on_commit));
}

void RunLedger::stop() {
  if (writer_) writer_->stop();  // commits what is still queued
}

void RunLedger::reserve() {
  if (writer_->has_room()) return;
  if (const std::string why = writer_->failure(); !why.empty())
    fail(ErrorKind::kIo, "hub: the ledger cannot commit (", why, "); restart the hub");
  busy_++;
  throw RequestError(
      503, cat("the ledger is ", writer_->pending(), " writes behind the disk; retry"), 1000);
}

uint64_t RunLedger::write(LedgerWriter::Write write) {
  return writer_->enqueue(std::move(write));
}

void RunLedger::hold_rollout(std::shared_ptr<const RolloutRow> row, uint64_t ticket) {
  const std::string id = row->id;
  held_rollouts_[id] = HeldRollout{std::move(row), ticket};
}

void RunLedger::hold_completion(uint64_t ticket) {
  completion_tickets_.push_back(ticket);
}

bool RunLedger::forget_durable() {
  const uint64_t durable = writer_->durable_ticket();
  for (auto it = held_rollouts_.begin(); it != held_rollouts_.end();)
    it = it->second.ticket <= durable ? held_rollouts_.erase(it) : std::next(it);
  bool completed = false;
  while (!completion_tickets_.empty() && completion_tickets_.front() <= durable) {
    completion_tickets_.pop_front();
    completed = true;
  }
  return completed;
}

std::optional<RolloutRow> RunLedger::rollout(const std::string& id) const {
  if (auto it = held_rollouts_.find(id); it != held_rollouts_.end()) return *it->second.row;
  return reader_->rollout(id);
}

std::vector<RolloutRow> RunLedger::rollouts_of_group(const std::string& group_id) const {
  // The ledger first: a row committed between the two reads is in both; keep the ledger's.
  std::vector<RolloutRow> rows = reader_->rollouts_of_group(group_id);
  for (const auto& [id, held] : held_rollouts_) {
    if (held.row->group_id != group_id) continue;
    const bool seen = std::any_of(rows.begin(), rows.end(),
                                  [&](const RolloutRow& r) { return r.id == held.row->id; });
    if (!seen) rows.push_back(*held.row);
  }
  return rows;
}

}  // namespace stoa::hub
