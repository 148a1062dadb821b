// `stoa bench hub --hoarder-addresses 1,2,8,50` (issue 51): the hoarding scenario over real HTTP
// with every hub setting at its default. The hub's per-address cap exempts loopback peers, so
// the Sybils must come from addresses that are not 127.0.0.0/8: the bench makes a network
// namespace of its own, gives that namespace's `lo` (never the host's) the hub's address, the
// honest workers' and 50 Sybil addresses in 10.234.0.0/16, and runs hub, fleet and all their
// threads inside it (threads inherit the namespace of the thread that makes them). The kernel's
// TCP carries every request as over any interface; no user-space router (net/netem/) burns the
// shared machine's CPU, and link shaping is not what this measures. One run alone, then one per
// address count, each on a fresh hub; the honest worker's throughput among the Sybils is
// reported as a share of its throughput alone.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/hub_bench.h"
#include "bench/hub_bench_run.h"
#include "core/error.h"
#include "core/machine.h"
#include "net/netem/netns.h"

namespace stoa::bench {
namespace {

using nlohmann::json;

constexpr const char* kPrefix = "stoa-hubbench-";
constexpr const char* kHubAddress = "10.234.0.1";

std::string honest_address(int i) {
  return "10.234.0." + std::to_string(2 + i);
}
std::string sybil_address(int i) {
  return "10.234." + std::to_string(1 + i / 250) + "." + std::to_string(1 + i % 250);
}

// The bench's namespace, removed on every way out (and by the next start if killed -9).
class BenchNamespace {
 public:
  BenchNamespace(int honest, int sybil_addresses) {
    net::netem::remove_stale_namespaces(kPrefix);
    name_ = kPrefix + std::to_string(::getpid());
    net::netem::ip_command("", {"netns", "add", name_});
    try {
      net::netem::ip_command(name_, {"link", "set", "lo", "up"});
      std::vector<std::string> addresses{kHubAddress};
      for (int i = 0; i < honest; ++i) addresses.push_back(honest_address(i));
      for (int i = 0; i < sybil_addresses; ++i) addresses.push_back(sybil_address(i));
      for (const auto& a : addresses)
        net::netem::ip_command(name_, {"addr", "add", a + "/32", "dev", "lo"});
    } catch (...) {
      net::netem::delete_netns(name_);
      throw;
    }
  }
  ~BenchNamespace() { net::netem::delete_netns(name_); }
  BenchNamespace(const BenchNamespace&) = delete;
  BenchNamespace& operator=(const BenchNamespace&) = delete;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

json run_inside(const std::string& netns, const HubBenchOptions& o, const HubRun& run) {
  json report;
  net::netem::run_in_netns(netns, [&] { report = run_hub_once(o, run); });
  return report;
}

}  // namespace

int run_hub_bench_at_defaults(const HubBenchOptions& o) {
  if (::geteuid() != 0) {
    std::fprintf(stderr,
                 "stoa bench hub --hoarder-addresses: needs root (it makes a network namespace "
                 "for the Sybils' addresses)\n");
    return 2;
  }
  const int hoarders = o.hoarders > 0 ? o.hoarders : 50;
  const int most =
      *std::max_element(o.hoarder_address_counts.begin(), o.hoarder_address_counts.end());
  STOA_CHECK(most >= 1 && most <= 250 * 250, ErrorKind::kInvalidArgument,
             "--hoarder-addresses: each count between 1 and 62500");
  STOA_CHECK(o.workers + o.slow_workers <= 200, ErrorKind::kInvalidArgument,
             "at most 200 honest workers in this mode");
  raise_fd_limit();
  const int honest = o.workers + o.slow_workers;
  BenchNamespace ns(honest, most);
  std::vector<std::string> worker_addresses;
  for (int i = 0; i < honest; ++i) worker_addresses.push_back(honest_address(i));

  HubRun alone_run;
  alone_run.hub_defaults = true;
  alone_run.hub_host = kHubAddress;
  alone_run.worker_addresses = worker_addresses;
  const json alone = run_inside(ns.name(), o, alone_run);
  const double a = alone["intake_rollouts_per_s"].get<double>();
  if (!o.json)
    std::printf(
        "stoa bench hub at the defaults: %d honest worker(s) alone %.2f rollouts/s (load %.2f); "
        "%d Sybils; hoarding deadline %.0f s\n",
        o.workers, a, alone["load_average"][0].get<double>(), hoarders,
        alone["hoard_deadline_s"].get<double>());

  json runs = json::array();
  for (int count : o.hoarder_address_counts) {
    HubRun run = alone_run;
    run.hoarders = hoarders;
    run.slow_workers = o.slow_workers;
    for (int i = 0; i < count; ++i) run.hoarder_addresses.push_back(sybil_address(i));
    json crowded = run_inside(ns.name(), o, run);
    const double c = crowded["intake_rollouts_per_s"].get<double>();
    json summary = {{"hoarder_addresses", count},
                    {"honest_rollouts_per_s", c},
                    {"honest_throughput_ratio", a > 0 ? c / a : 0.0},
                    {"honest_leases_cancelled", crowded["honest_leases_cancelled"]},
                    {"hub", crowded["hub"]},
                    {"hoarder_leases", crowded["hoarder_leases"]},
                    {"hoarder_leases_cancelled", crowded["hoarder_leases_cancelled"]},
                    {"slow_workers", crowded.value("slow_workers", json())},
                    {"errors", crowded["errors"]},
                    {"load_average", crowded["load_average"]},
                    {"run", crowded}};
    if (!o.json) {
      const json& slow = summary["slow_workers"];
      std::printf(
          "  %2d addresses: honest %.2f rollouts/s (%.1f %% of alone), its leases cancelled "
          "%llu; groups opened for waiting %.0f, revoked %.0f, preempted %.0f; slow worker: "
          "%s rollouts, %s leases cancelled, standing %s; load %.2f\n",
          count, c, a > 0 ? 100 * c / a : 0.0,
          static_cast<unsigned long long>(crowded["honest_leases_cancelled"].get<uint64_t>()),
          crowded["hub"]["groups_opened_for_waiting"].get<double>(),
          crowded["hub"]["leases_revoked"].get<double>(),
          crowded["hub"]["leases_preempted"].get<double>(),
          slow.is_null() ? "-" : slow["rollouts_accepted"].dump().c_str(),
          slow.is_null() ? "-" : slow["leases_cancelled"].dump().c_str(),
          slow.is_null() ? "-" : slow["standing"].dump().c_str(),
          crowded["load_average"][0].get<double>());
      std::fflush(stdout);
    }
    runs.push_back(summary);
  }
  json report = {{"hub_defaults", true},
                 {"honest_workers", o.workers},
                 {"hoarders", hoarders},
                 {"hoard_deadline_s", alone["hoard_deadline_s"]},
                 {"measured_seconds", o.seconds},
                 {"think_seconds", o.think_seconds},
                 {"honest_rollouts_per_s_alone", a},
                 {"by_addresses", runs},
                 {"alone", alone},
                 {"load_average", load_averages()}};
  if (o.json) std::printf("%s\n", report.dump(2).c_str());
  return 0;
}

}  // namespace stoa::bench
