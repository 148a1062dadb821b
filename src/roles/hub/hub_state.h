// The hub's memory and its one lock: the parts (each a class of its own folder, docs/
// architecture.md) and what spans them, shared by the Hub (hub.h: the protocol's calls and the
// TrainerPort) and its facades HubAccess (hub_access.h) and HubChecks (hub_checks.h). Only they
// include this header; everyone else calls the Hub. mutex_ guards every field below except
// config_ and deps_ (fixed after construction) and history_ (RunHistory locks on its own); none of
// the parts locks on its own. Ledger writes are queued under mutex_, in the order memory changed,
// and group-committed by the RunLedger's writer thread; a call that wrote waits for durability
// after releasing mutex_.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "roles/hub/groups/pipeline_groups.h"
#include "roles/hub/hub_config.h"
#include "roles/hub/identity/identity.h"
#include "roles/hub/leasing/group_book.h"
#include "roles/hub/ledger/run_ledger.h"
#include "roles/hub/observe/run_history.h"
#include "roles/hub/prompts/prompt_deck.h"
#include "roles/hub/roster/worker_roster.h"
#include "roles/hub/versions/version_catalog.h"

namespace stoa::hub {

struct HubCounters;
class Verification;

struct HubState {
  // The parts that need only the configuration; the ledger, the verification and the restored
  // state are made by the Hub's constructor (hub.cpp), which checks the configuration first.
  HubState(HubConfig config, HubDeps deps);
  ~HubState();
  HubState(const HubState&) = delete;
  HubState& operator=(const HubState&) = delete;

  int64_t now() const { return deps_.clock_ms(); }

  HubConfig config_;
  HubDeps deps_;
  // Reads under mutex_, writes through its group commit; stopped (drained) first in ~Hub while
  // the rest still exists.
  std::unique_ptr<RunLedger> ledger_;
  mutable std::mutex mutex_;
  std::condition_variable version_cv_;
  std::condition_variable groups_cv_;
  bool stopped_ = false;
  std::function<void()> version_listener_;
  PipelineSigners pipeline_signers_;  // unset: no pipeline groups (set_pipeline_signers)

  WorkerRoster roster_;            // the workers present, the run's end
  Identity identity_;              // tokens, sessions, rate limits
  GroupBook book_;                 // groups, leases and fair leasing
  std::set<std::string> pending_;  // handed to the trainer, not yet marked
  VersionCatalog versions_;        // versions published, the catch-up catalog
  // The prompts' order, cursor and rendered tokens. A lease path meets a prompt not rendered
  // before it wrote anything (PromptDeck::NotRendered): lease() renders it outside the lock and
  // tries again, so a slow environment never holds every other request behind the hub's mutex.
  PromptDeck prompts_;
  std::unique_ptr<HubCounters> counters_;
  RunHistory history_;
  // Seeds, replays, held groups, peer checks, quarantine; made with the ledger, whose rows it
  // reads and writes.
  std::unique_ptr<Verification> verification_;
  int64_t last_step_ = 0;  // the ledger's last step, kept in memory
};

}  // namespace stoa::hub
