// `stoa bench sybil`: the economics of peer checks under collusion (docs/design/verification.md,
// "Sybil economics"), simulated on the real hub. A fleet of simulated workers drives an
// in-process hub::Hub with [verify] peer through its own calls (lease, submit, lease_check,
// record_check, take_groups) on a simulated clock: a fraction f of the workers is one attacker's,
// which behaves for its first groups, then forges every rollout, and as checkers passes its own
// forgeries (and answers every other check honestly, so as not to be caught for it). Check jobs
// come blinded (no author, no rollout id), so the attacker's checkers know a forgery of theirs by
// its content (the team keeps the seeds it forged on); passing whatever fails their replay
// instead would be passing everything, which is what a lazy checker does: a share of the honest
// workers may be lazy checkers that pass every check unreplayed. The hub's
// trusted replay is stood in for by the truth (exact replay decides exactly: tested on real
// replays in test_verify_peer and test_verify_replay). Measured per f: forged rollouts submitted,
// trained and caught, attackers and honest workers quarantined, and the checking work per
// accepted rollout, in replays, split between the fleet and the hub; beside the analytic rate.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace stoa::bench {

struct SybilSimOptions {
  int workers = 50;
  std::vector<double> attacker_fractions = {0.0, 0.1, 0.2, 0.3, 0.4, 0.49};
  std::vector<double> audit_fractions = {0.1};
  int seconds = 1800;     // simulated
  int group_seconds = 5;  // a group of G samples generated
  // Rollouts a worker replays in a simulated second: a replay is a prefill, about a third of
  // what generating the rollout cost on the demo's shape (docs/design/verification.md, "Cost"),
  // so ~2 against the 0.8 rollouts a second it generates.
  int checks_per_s = 2;
  // Rollouts of each of its groups the attacker forges once it forges (1: the hardest case to
  // catch — the group's other rollouts are honest; 4: every one).
  int forged_per_group = 1;
  // The hub's trusted replays a second: one core replays ~50 of the demo's rollouts a second
  // (0.017-0.020 CPU-s each, docs/design/verification.md "Cost"); a fifth of that here.
  int hub_replays_per_s = 10;
  int64_t first_rollouts = 16;
  double check_share = 1.0;
  int64_t check_allowance = 2;
  double canary_fraction = 0.05;  // [verify] canary_fraction
  double lazy_fraction = 0;       // of the honest workers: pass every check without replaying it
  uint64_t seed = 1;
};

nlohmann::json run_sybil_sim(const SybilSimOptions& options);

}  // namespace stoa::bench
