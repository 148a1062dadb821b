#include "bench/hub_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/bench_task.h"
#include "bench/group_drain.h"
#include "bench/hub_bench_fleet.h"
#include "bench/hub_bench_run.h"
#include "core/log.h"
#include "core/machine.h"
#include "net/protocol.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub.h"

namespace stoa::bench {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

json latency_summary(std::vector<double> ms) {
  if (ms.empty()) return {{"count", 0}};
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(q * static_cast<double>(ms.size() - 1) + 0.5);
    return ms[std::min(i, ms.size() - 1)];
  };
  return {{"count", ms.size()}, {"p50_ms", at(0.5)}, {"p99_ms", at(0.99)}, {"max_ms", ms.back()}};
}

}  // namespace

// 1000 workers hold two connections each on both ends of loopback: well over the default 1024
// descriptors.
void raise_fd_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

// One bench run on a fresh hub with run.hoarders Sybils beside o.workers honest workers.
json run_hub_once(const HubBenchOptions& o, const HubRun& run) {
  const int hoarders = run.hoarders;
  const bool temp = o.workdir.empty();
  fs::path dir =
      temp ? fs::temp_directory_path() / ("stoa_hub_bench_" + net::random_token().substr(0, 10))
           : fs::path(o.workdir);
  fs::create_directories(dir);
  BenchTask world(dir, 64);

  hub::HubConfig config;
  config.ledger_path = (dir / "ledger.sqlite").string();
  std::error_code ec;
  fs::remove(config.ledger_path, ec);
  config.join_token = "bench-join-token";
  if (!run.hub_defaults) {
    config.group_size = 4;
    config.max_staleness = 1000;  // the bench measures transport, not the staleness policy
    config.max_open_groups = static_cast<size_t>(std::max(16, o.workers));
    config.max_queued_groups = static_cast<size_t>(std::max(64, 4 * o.workers));
    config.lease_ttl_ms = 600'000;
    config.lease_max_ms = 3'600'000;
    // The hoarding deadline in the hub's own terms: max_turns × max_new_tokens at this rate.
    config.hoard_grace_ms = 0;
    config.hoard_min_tokens_per_s = static_cast<double>(config.sampling.max_turns) *
                                    config.sampling.max_new_tokens /
                                    std::max(0.001, o.hoard_deadline_seconds);
  }
  hub::Hub hub(config, world.deps());

  hub::ServerOptions so;
  so.host = run.hub_host;
  if (!run.hub_defaults) {
    so.threads = o.handler_threads;
    so.max_connections_per_ip = 1024;
  }
  hub::HubServer server(hub, so);
  server.start();

  std::atomic<bool> running{true};
  std::atomic<uint64_t> version{1};
  auto publish = [&](uint64_t v) {
    pulse::Published p;
    p.version = v;
    hub.publish_version(p, Hash128{v, v});
  };
  publish(1);

  GroupDrain trainer(hub, 64);

  FleetOptions fo;
  fo.port = server.port();
  fo.workers = o.workers;
  fo.slow_clients = o.slow_clients;
  fo.join_token = config.join_token;
  fo.ramp_seconds = o.ramp_seconds;
  fo.think_seconds = o.think_seconds;
  fo.heartbeat_seconds = std::max(0.1, o.heartbeat_seconds);
  fo.hoarders = hoarders;
  fo.hub_host = run.hub_host;
  fo.worker_addresses = run.worker_addresses;
  fo.hoarder_addresses = run.hoarder_addresses;
  fo.slow_workers = run.slow_workers;
  fo.slow_factor = o.slow_factor;
  SimulatedFleet fleet(fo);
  fleet.start();

  // The publisher: a version every publish_seconds wakes every parked long-poll at once.
  std::thread publisher([&] {
    auto next = Clock::now();
    while (running) {
      next += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(o.publish_seconds));
      while (running && Clock::now() < next)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (!running) break;
      uint64_t v = ++version;
      fleet.published(v);
      publish(v);
    }
  });

  // Warm-up: every worker joined and one think time passed (leases in flight everywhere).
  auto warm_deadline = Clock::now() + std::chrono::seconds(120);
  while (fleet.joined() < static_cast<uint64_t>(o.workers) && Clock::now() < warm_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(
      o.warmup_seconds >= 0 ? o.warmup_seconds : o.think_seconds + 1));

  double cpu0 = server.cpu_seconds();
  const auto ledger0 = hub.counters();
  auto t0 = Clock::now();
  fleet.measure(true);
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  fleet.measure(false);
  double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  double cpu = server.cpu_seconds() - cpu0;
  auto stats = server.stats();
  auto load = load_averages();
  const auto ledger1 = hub.counters();
  auto delta = [&](const char* key) { return ledger1.at(key) - ledger0.at(key); };
  // The group commit during the measured phase: transactions (one fsync each) and writes.
  const double commits = delta("ledger_commits");
  json ledger = {
      {"commits", commits},
      {"writes", delta("ledger_writes")},
      {"commits_per_s", commits / wall},
      {"writes_per_commit", commits > 0 ? delta("ledger_writes") / commits : 0.0},
      {"mean_commit_ms", commits > 0 ? 1000 * delta("ledger_commit_seconds") / commits : 0.0},
      {"slowest_commit_ms", 1000 * ledger1.at("ledger_slowest_commit_seconds")},
      {"largest_commit", ledger1.at("ledger_largest_commit")},
      {"busy_503", delta("ledger_busy")}};

  running = false;
  publisher.join();
  fleet.stop();
  FleetResults r = fleet.results();
  const json hub_status = hub.status();
  const auto counters_at_end = hub.counters();
  hub.stop();
  trainer.stop();
  server.stop();

  json endpoints = json::object();
  for (auto& [name, ms] : r.latency_ms) endpoints[name] = latency_summary(ms);
  json statuses = json::object();
  for (auto& [code, n] : r.statuses) statuses[std::to_string(code)] = n;
  json report = {{"workers", o.workers},
                 {"slow_clients", o.slow_clients},
                 {"joined", r.joined},
                 {"measured_seconds", wall},
                 {"think_seconds", o.think_seconds},
                 {"heartbeat_seconds", o.heartbeat_seconds},
                 {"publish_seconds", o.publish_seconds},
                 {"handler_threads", o.handler_threads},
                 {"endpoints", endpoints},
                 {"intake_rollouts_per_s", static_cast<double>(r.rollouts_accepted) / wall},
                 {"errors", r.errors},
                 {"statuses", statuses},
                 {"slow_clients_cut", r.slow_dropped},
                 {"hub_cpu_seconds", cpu},
                 {"hub_cpu_fraction", cpu / wall},
                 {"peak_rss_bytes", own_process_memory().hwm_bytes},
                 {"connections_at_end", stats.connections},
                 {"parked_at_end", stats.parked},
                 {"timed_out_connections", stats.timed_out},
                 {"refused_connections", stats.refused_connections},
                 {"busy_replies", stats.busy_replies},
                 {"ledger", ledger},
                 {"load_average", load}};
  if (hoarders > 0) {
    report["hoarders"] = hoarders;
    if (!run.hub_defaults) report["hoard_deadline_seconds"] = o.hoard_deadline_seconds;
    report["hoarder_leases"] = r.hoarder_leases;
    report["hoarder_leases_cancelled"] = r.hoarder_cancelled;
    for (const char* k : {"leases_revoked", "leases_preempted", "leases_capped", "leases_deferred",
                          "workers_hoarding", "groups_opened_for_waiting"})
      report["hub"][k] = counters_at_end.at(k);
  }
  report["honest_leases_cancelled"] = r.honest_cancelled;
  report["hub_defaults"] = run.hub_defaults;
  report["hoard_deadline_s"] =
      (static_cast<double>(config.hoard_grace_ms) + 1000.0 * config.sampling.max_turns *
                                                        config.sampling.max_new_tokens /
                                                        config.hoard_min_tokens_per_s) /
      1000.0;
  if (run.slow_workers > 0) {
    json standings = json::array();
    for (const auto& w : hub_status["workers"])
      if (std::find(r.slow_ids.begin(), r.slow_ids.end(), w["id"].get<std::string>()) !=
          r.slow_ids.end())
        standings.push_back(w["standing"]);
    report["slow_workers"] = {{"count", run.slow_workers},
                              {"speed_fraction", 1.0 / o.slow_factor},
                              {"leases", r.slow_leases},
                              {"leases_cancelled", r.slow_cancelled},
                              {"rollouts_accepted", r.slow_rollouts_accepted},
                              {"standing", standings}};
  }
  if (temp) fs::remove_all(dir, ec);
  return report;
}

namespace {

void print_text(const json& report) {
  const auto load = report["load_average"].get<std::vector<double>>();
  std::printf("stoa bench hub: %d workers, %d slow clients, %.1f s measured (load %.2f)\n",
              report["workers"].get<int>(), report["slow_clients"].get<int>(),
              report["measured_seconds"].get<double>(), load[0]);
  for (auto& [name, s] : report["endpoints"].items()) {
    if (s["count"] == 0) continue;
    std::printf("  %-13s n=%-7llu p50 %8.2f ms  p99 %8.2f ms  max %8.2f ms\n", name.c_str(),
                static_cast<unsigned long long>(s["count"].get<uint64_t>()),
                s["p50_ms"].get<double>(), s["p99_ms"].get<double>(), s["max_ms"].get<double>());
  }
  const double cpu = report["hub_cpu_seconds"].get<double>();
  std::printf(
      "  intake %.1f rollouts/s, hub CPU %.2f s (%.0f%% of a core), peak RSS %.0f MiB, "
      "errors %llu\n",
      report["intake_rollouts_per_s"].get<double>(), cpu,
      100 * report["hub_cpu_fraction"].get<double>(),
      static_cast<double>(report["peak_rss_bytes"].get<uint64_t>()) / (1 << 20),
      static_cast<unsigned long long>(report["errors"].get<uint64_t>()));
}

}  // namespace

int run_hub_bench(const HubBenchOptions& o) {
  if (!o.hoarder_address_counts.empty()) return run_hub_bench_at_defaults(o);
  raise_fd_limit();
  json alone = run_hub_once(o, HubRun{});
  if (o.hoarders <= 0) {
    if (o.json)
      std::printf("%s\n", alone.dump(2).c_str());
    else
      print_text(alone);
    return 0;
  }
  HubRun crowded_run;
  crowded_run.hoarders = o.hoarders;
  json crowded = run_hub_once(o, crowded_run);
  const double a = alone["intake_rollouts_per_s"].get<double>();
  const double c = crowded["intake_rollouts_per_s"].get<double>();
  json report = {{"honest_workers", o.workers},
                 {"hoarders", o.hoarders},
                 {"honest_rollouts_per_s_alone", a},
                 {"honest_rollouts_per_s_with_hoarders", c},
                 {"honest_throughput_ratio", a > 0 ? c / a : 0.0},
                 {"alone", alone},
                 {"with_hoarders", crowded},
                 {"load_average", load_averages()}};
  if (o.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    print_text(crowded);
    std::printf(
        "  honest workers: %.2f rollouts/s alone, %.2f with %d hoarders (%.0f %%); hub revoked "
        "%.0f leases, preempted %.0f\n",
        a, c, o.hoarders, a > 0 ? 100 * c / a : 0.0, crowded["hub"]["leases_revoked"].get<double>(),
        crowded["hub"]["leases_preempted"].get<double>());
  }
  return 0;
}

}  // namespace stoa::bench
