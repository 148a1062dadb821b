// `stoa bench swarm`: a version and a fresh anchor to N workers on emulated home links, with
// peers serving each other and without (bench/swarm_bench.h). Needs root (network namespaces).
#include <memory>

#include "bench/swarm_bench.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration bench_cmd(
    "bench swarm",
    "time for a version (and a fresh anchor) to reach N sync-only workers on emulated home "
    "links, and the hub's bytes out, with peers serving each other and from the hub alone",
    [](CLI::App& app) {
      auto o = std::make_shared<bench::SwarmBenchOptions>();
      app.add_option("--workers", o->workers, "worker counts, one run each")
          ->delimiter(',')
          ->capture_default_str();
      app.add_option("--modes", o->modes, "peers (--swarm on), hub (--swarm off)")
          ->delimiter(',')
          ->capture_default_str();
      app.add_option("--anchor-mb", o->anchor_mb)->capture_default_str();
      app.add_option("--patch-mb", o->patch_mb)->capture_default_str();
      app.add_option("--hub-mbit", o->rates.hub_up_mbit, "the hub's uplink")->capture_default_str();
      app.add_option("--down-mbit", o->rates.down_mbit, "each worker's downlink")
          ->capture_default_str();
      app.add_option("--up-mbit", o->rates.up_mbit, "each worker's uplink")->capture_default_str();
      app.add_option("--upload", o->upload,
                     "the workers' --upload: KiB/s (0: only the link caps), or auto (their "
                     "default: a share of the uplink each measures against the hub)")
          ->capture_default_str();
      app.add_option("--web-seed-copies", o->web_seed_copies,
                     "the hub's swarm_web_seed_copies: each piece's copies out of its web seed")
          ->check(CLI::Range(1, 255))
          ->capture_default_str();
      app.add_option("--web-seed-budget", o->web_seed_budget,
                     "the hub's swarm_web_seed_budget: blob sizes out of its web seed before "
                     "second copies stop")
          ->check(CLI::Range(1.0, 255.0))
          ->capture_default_str();
      app.add_option("--reseed-after", o->reseed_after_s,
                     "the hub's swarm_reseed_after_s: seconds before a piece leaves it again")
          ->check(CLI::Range(1, 3600))
          ->capture_default_str();
      app.add_flag("--netem", o->netem,
                   "links through the link emulator (docs/design/netem.md): RTT, jitter, loss "
                   "and NAT as well as the rates");
      app.add_option("--rtt-ms", o->rtt_ms, "with --netem: each worker's RTT to the hub")
          ->check(CLI::Range(0.0, 10000.0))
          ->capture_default_str();
      app.add_option("--jitter-ms", o->jitter_ms, "with --netem: ± on each direction")
          ->check(CLI::Range(0.0, 10000.0))
          ->capture_default_str();
      app.add_option("--loss", o->loss, "with --netem: each packet's chance to be lost, each way")
          ->check(CLI::Range(0.0, 1.0))
          ->capture_default_str();
      app.add_option("--natted", o->natted, "with --netem: the fraction of workers behind NAT")
          ->check(CLI::Range(0.0, 1.0))
          ->capture_default_str();
      app.add_option("--nat", o->nat,
                     "with --netem: full-cone, restricted-cone, port-restricted or symmetric")
          ->capture_default_str();
      app.add_option("--workdir", o->workdir);
      app.add_flag("--keep", o->keep, "keep the work directory");
      app.add_option("--timeout", o->timeout_s, "seconds per phase")->capture_default_str();
      app.add_flag("--json", o->json);
      return [o] { return bench::run_swarm_bench(*o); };
    });

}  // namespace
}  // namespace stoa::cli
