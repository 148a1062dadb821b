// `stoa bench hub`: the hub's HTTP front end under a simulated fleet (bench/hub_bench.h).
#include <memory>

#include "bench/hub_bench.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration bench_cmd(
    "bench hub", "N simulated workers against a real hub: latency per endpoint, hoarding",
    [](CLI::App& app) {
      auto opts = std::make_shared<bench::HubBenchOptions>();
      app.add_option("--workers", opts->workers, "simulated workers");
      app.add_option("--slow-clients", opts->slow_clients,
                     "extra connections that send one header byte every 5 s");
      app.add_option("--seconds", opts->seconds, "measured phase (after every worker joined)");
      app.add_option("--ramp", opts->ramp_seconds, "workers join spread over this many seconds");
      app.add_option("--think", opts->think_seconds, "seconds a simulated lease takes");
      app.add_option("--heartbeat", opts->heartbeat_seconds, "seconds between heartbeats");
      app.add_option("--publish-every", opts->publish_seconds, "seconds between versions");
      app.add_option("--handler-threads", opts->handler_threads, "the hub's request handlers");
      app.add_option("--workdir", opts->workdir, "ledger and blobs (default: a temp dir)");
      app.add_option("--hoarders", opts->hoarders,
                     "Sybils that lease all they can and never submit: runs the workers alone, "
                     "then among them, and reports their throughput in both");
      app.add_option("--hoard-deadline", opts->hoard_deadline_seconds,
                     "seconds without a rollout before the hub revokes a lease");
      app.add_option("--warmup", opts->warmup_seconds,
                     "seconds before the measured phase (default: --think + 1)");
      app.add_option("--hoarder-addresses", opts->hoarder_address_counts,
                     "the hoarding scenario at the hub's defaults: the Sybils (--hoarders, 50 "
                     "if unset) from this many distinct non-loopback addresses, each count in "
                     "turn (e.g. 1,2,8,50), after one run alone; needs root")
          ->delimiter(',');
      app.add_option("--slow-workers", opts->slow_workers,
                     "with --hoarder-addresses: honest workers at 1/--slow-factor of the speed");
      app.add_option("--slow-factor", opts->slow_factor, "how many times slower they are");
      app.add_flag("--json", opts->json, "print JSON");
      return [opts] { return bench::run_hub_bench(*opts); };
    });

}  // namespace
}  // namespace stoa::cli
