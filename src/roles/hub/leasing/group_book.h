// The run's groups and leases as the hub holds them in memory: every group and lease of the run
// (restored from the ledger at start), the indexes the per-request paths walk instead of the
// run's history — the groups open for sampling in creation order, the complete ones waiting for
// the trainer, the open leases — and fair leasing's view of who holds what (lease_fairness.h).
// Invariants: a lease is in open_leases() exactly when its state is open, and then fairness()
// counts it; the group lists are pruned lazily (a group leaves them by changing status
// anywhere), so a caller reads them through open_groups() and queued_groups(). Not thread-safe:
// the Hub calls it under its lock; writing the rows to the ledger is the Hub's.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "roles/hub/leasing/lease_fairness.h"
#include "roles/hub/ledger/ledger.h"

namespace stoa::hub {

struct GroupState {
  GroupRow row;
  int64_t accepted = 0;
  std::map<std::string, int64_t> accepted_by_lease;
  uint64_t complete_ticket = 0;  // the ledger write that completed it: durable before training
  size_t order = 0;              // index in creation order
};

class GroupBook {
 public:
  explicit GroupBook(const LeaseCaps& caps) : fairness_(caps) {}

  // ---- groups ----
  void add_group(const GroupRow& row);  // to the groups and the indexes its status puts it in
  std::map<std::string, GroupState>& groups() { return groups_; }
  const std::map<std::string, GroupState>& groups() const { return groups_; }
  // Open groups, oldest first (pruned of those no longer open).
  const std::vector<std::string>& open_groups();
  // Complete groups waiting for the trainer (pruned of those trained, dropped or taken back).
  const std::vector<std::string>& complete_groups() const;
  size_t queued_groups() const { return complete_groups().size(); }
  // Group `g` took its last rollout, in ledger write `ticket`: it waits for the trainer.
  void mark_complete(GroupState& g, uint64_t ticket);

  // ---- leases ----
  // A lease as it now is: to the leases, and to the open ones and fairness while its state is
  // open (`peer`: the address it was asked from; a restored lease counts from `now_ms`, since the
  // hub being down is not the worker's delay).
  void set_lease(const LeaseRow& lease, const std::string& peer, int64_t now_ms);
  std::map<std::string, LeaseRow>& leases() { return leases_; }
  const std::map<std::string, LeaseRow>& leases() const { return leases_; }
  const std::set<std::string>& open_leases() const { return open_leases_; }
  // Open leases past their deadline: marked expired, closed, and returned (to be written).
  std::vector<LeaseRow> expire(int64_t now_ms);
  // Samples still out per group: each open lease's samples less its accepted rollouts.
  std::map<std::string, int64_t> outstanding_by_group() const;
  // What group `g` still needs leased: its samples less those accepted and those still out.
  int64_t needed(const GroupState& g, const std::map<std::string, int64_t>& outstanding) const;

  LeaseFairness& fairness() { return fairness_; }
  const LeaseFairness& fairness() const { return fairness_; }

 private:
  std::map<std::string, GroupState> groups_;
  size_t groups_made_ = 0;
  std::vector<std::string> open_group_order_;       // status open when added, creation order
  mutable std::vector<std::string> complete_list_;  // status complete when added
  std::map<std::string, LeaseRow> leases_;
  std::set<std::string> open_leases_;  // ids of leases in state open
  LeaseFairness fairness_;             // caps, the waiting order, standing
};

}  // namespace stoa::hub
