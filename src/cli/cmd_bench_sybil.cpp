// `stoa bench sybil`: peer checks under collusion, simulated on the real hub (bench/sybil_sim.h).
#include <cstdio>
#include <memory>

#include "bench/sybil_sim.h"
#include "cli/command.h"
#include "core/log.h"

namespace stoa::cli {
namespace {

CommandRegistration bench_cmd(
    "bench sybil",
    "peer checks against one attacker holding a fraction of the fleet (forging, colluding as "
    "checkers), simulated on the real hub: forged rollouts trained, caught, checking cost",
    [](CLI::App& app) {
      auto o = std::make_shared<bench::SybilSimOptions>();
      app.add_option("--workers", o->workers)->capture_default_str();
      app.add_option("--fractions", o->attacker_fractions, "the attacker's share of the workers");
      app.add_option("--audit", o->audit_fractions, "[verify] audit_fraction values");
      app.add_option("--seconds", o->seconds, "simulated seconds per run")->capture_default_str();
      app.add_option("--group-seconds", o->group_seconds, "simulated seconds to generate a group")
          ->capture_default_str();
      app.add_option("--checks-per-s", o->checks_per_s, "rollouts a worker replays a second")
          ->capture_default_str();
      app.add_option("--forged-per-group", o->forged_per_group,
                     "rollouts of each group the attacker forges (of 4)")
          ->capture_default_str();
      app.add_option("--hub-replays", o->hub_replays_per_s, "the hub's replays per second")
          ->capture_default_str();
      app.add_option("--first-rollouts", o->first_rollouts)->capture_default_str();
      app.add_option("--check-share", o->check_share)->capture_default_str();
      app.add_option("--check-allowance", o->check_allowance)->capture_default_str();
      app.add_option("--canary", o->canary_fraction, "[verify] canary_fraction")
          ->capture_default_str();
      app.add_option("--lazy", o->lazy_fraction,
                     "share of the honest workers that pass every check without replaying")
          ->check(CLI::Range(0.0, 1.0))
          ->capture_default_str();
      app.add_option("--seed", o->seed)->capture_default_str();
      return [o] {
        set_log_level(LogLevel::kError);  // every quarantine is logged: thousands of lines
        std::printf("%s\n", bench::run_sybil_sim(*o).dump(2).c_str());
        return 0;
      };
    });

}  // namespace
}  // namespace stoa::cli
