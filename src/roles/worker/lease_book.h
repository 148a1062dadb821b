// The groups a worker holds: each lease, the problem its episodes refer to, and how many of its
// G samples are still to start / running. Shared by the rollout loop (which starts, ends and
// forgets samples) and the heartbeat thread (which lists the leases, renewing them, and marks
// the ones the hub cancelled).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "env/dataset.h"
#include "net/hub_client.h"
#include "roles/worker/hub_contact.h"

namespace stoa::worker {

struct LeaseWork {
  net::Lease lease;
  env::QaItem problem;
  int to_start = 0;
  int running = 0;
  bool cancelled = false;
};

class LeaseBook {
 public:
  void add(std::shared_ptr<LeaseWork> work);
  // A group with samples left to start that was not cancelled, oldest first; null when none.
  std::shared_ptr<LeaseWork> next_to_start() const;
  void started(LeaseWork& work);  // one sample more running, one less to start
  void ended(LeaseWork& work);    // one sample less running (finished or dropped)
  bool cancelled(const LeaseWork& work) const;
  // Forgets groups with nothing left to do (all samples ended, or cancelled and none running).
  void forget_finished();

  std::vector<std::string> lease_ids() const;
  void mark_cancelled(const std::vector<std::string>& lease_ids);
  // Groups not cancelled with samples still to start or running (released at shutdown).
  std::vector<std::shared_ptr<LeaseWork>> unfinished() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<LeaseWork>> works_;
};

// Leases one group from the hub. Null when the hub has none (or is unreachable): then
// `retry_after_ms` says when to ask again (longer as an outage lasts, told to `contact`), and
// `run_ended` is set when the hub says the run is over. A prompt that leaves no room to generate
// under max_tokens (a hub that skips such prompts never sends one) is released back to the hub.
// Throws net::JoinRefused, and the hub's 403 (quarantined): nothing a retry can mend.
std::shared_ptr<LeaseWork> lease_group(net::HubClient& hub, int64_t max_tokens,
                                       int64_t* retry_after_ms, HubContact& contact,
                                       std::atomic<bool>& run_ended);

}  // namespace stoa::worker
