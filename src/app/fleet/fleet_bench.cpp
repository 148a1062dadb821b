// `stoa bench fleet`: the same short asynchronous RL run — `stoa run` (hub + trainer) and N
// `stoa work` processes — four times, side by side:
//   loopback-pulse  workers on plain loopback, PULSE patches (anchors every [pulse] default)
//   loopback-int8   workers on plain loopback, a full int8 anchor every version
//   home-pulse      every worker behind an emulated home link (default 50 Mbit/s each way, 40 ms
//                   round trip), PULSE patches
//   home-int8       the same link, full int8 every version
// Each configuration runs a fixed time (--seconds) from fresh state on the same assets. Reported
// per configuration: the trainer's busy fraction, the workers' idle fraction, the weight-sync
// latency per version (p50/p95: from the hub publishing v to each worker generating with v or
// newer), rollouts/s accepted, and bytes on the wire each way.
//
// How it is measured (see docs/design/fleet.md):
//   - every worker talks to the hub through its own LinkProxy (link_proxy.h), which counts
//     the bytes each way; on loopback it adds no delay;
//   - the home link is a network namespace per worker with a veth pair and `tbf` on both ends
//     (fleet_link.h), the proxy adding the one-way delay; without network namespaces (no root)
//     the proxy's own token bucket stands in for tbf, and the JSON says so ("link_emulation");
//   - publish times come from an observer that long-polls the hub's /v1/version directly;
//     switch times from the workers' logs ("generating with version N"), same clock;
//   - the trainer's busy fraction from steps.jsonl, the idle fraction from each worker's final
//     log line, rollouts from the hub's /v1/status counters at the end of the window.
#include "app/fleet/fleet_bench.h"

#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/fleet/fleet_assets.h"
#include "app/fleet/fleet_link.h"
#include "app/fleet/fleet_metrics.h"
#include "app/fleet/fleet_process.h"
#include "app/fleet/version_observer.h"
#include "core/error.h"
#include "core/log.h"
#include "core/machine.h"
#include "net/http_client.h"
#include "net/hub_client.h"
#include "net/link_proxy.h"
#include "roles/run/run_config.h"

namespace stoa::app {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using fleet::Child;
using fleet::ChildSpec;

constexpr const char* kToken = "fleet-bench";

std::atomic<bool> g_interrupted{false};
void interrupt_bench_fleet(int) {
  g_interrupted = true;
}

void check_interrupt() {
  // Thrown so that unwinding stops every child and removes the namespaces on the way out.
  STOA_CHECK(!g_interrupted, ErrorKind::kIo,
             "bench fleet: interrupted by a signal; children stopped, links removed");
}

json num(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

// ---- one configuration ----
struct ConfigSpec {
  std::string name;
  bool home = false;
  bool full_int8 = false;
};

// The run.toml of one configuration, written to <dir>/run.toml; returns its path.
std::string write_run_toml(const FleetBenchOptions& o, const fleet::Assets& a, const ConfigSpec& c,
                           const std::string& dir) {
  run::RunConfig rc;
  rc.run_dir = dir + "/run";
  rc.model_dir = a.model;
  rc.data_dir = a.data;
  rc.task = "search";
  rc.task_options.set("index", a.index);
  rc.hub.join_token = kToken;
  rc.hub.group_size = 4;
  rc.hub.seed = 1;
  rc.hub.sampling.temperature = 1.0f;
  rc.hub.sampling.max_new_tokens = 48;
  rc.hub.sampling.max_turns = 2;
  rc.hub.sampling.max_observation_tokens = 128;
  rc.train.threads = o.trainer_threads;
  rc.loop.groups_per_step = 1;
  rc.loop.min_groups = 1;
  rc.loop.gather_timeout = std::chrono::milliseconds(1000);
  rc.loop.staleness.max_staleness = 4;
  // A checkpoint per step would add ~0.1 GB of writes per step to what is measured here.
  rc.loop.checkpoint_every = 1000000;
  // Full int8 each version: an anchor every version is not enough on its own, because the
  // publisher also writes the patch from the previous version and the hub's route planner
  // serves the cheapest route (the patch). Keeping only the newest anchor prunes every patch
  // (retention keeps patches starting at or after the oldest kept anchor), so a worker one
  // version behind must fetch the whole anchor.
  if (c.full_int8) {
    rc.loop.publisher.anchor_every = 1;
    rc.loop.publisher.retention.keep_anchors = 1;
  }
  const std::string path = dir + "/run.toml";
  run::save_run_config(rc, path, "written by stoa bench fleet (" + c.name + ")");
  return path;
}

json fetch_status(const std::string& url) {
  net::HttpClientOptions ho;
  ho.max_attempts = 3;
  net::HttpClient http(url, ho);
  const net::HttpResponse r = http.get("/v1/status");
  net::check_ok(r, "GET /v1/status");
  return json::parse(r.body);
}

std::string link_emulation_name(bool netns) {
  return netns ? "netns+veth+tbf (rate, each way) + stoa delay proxy (latency)"
               : "stoa delay proxy on loopback (token-bucket rate + latency; no network "
                 "namespaces)";
}

json run_config(const FleetBenchOptions& o, const std::string& exe, const fleet::Assets& a,
                const ConfigSpec& c, const std::string& base, fleet::HomeLinks* links) {
  const std::string dir = fs::absolute(base + "/" + c.name).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string toml = write_run_toml(o, a, c, dir);
  log_info("bench", c.name, ": starting the hub + trainer");

  Child run;
  run.start(exe, {{"run", "--config", toml}, dir + "/run.log", ""});
  const std::string hub_json = dir + "/run/hub.json";
  const auto hub_deadline = Clock::now() + 300s;
  while (!fs::exists(hub_json)) {
    check_interrupt();
    STOA_CHECK(run.running(), ErrorKind::kInternal, "bench fleet: stoa run exited (", c.name,
               "):\n", fleet::tail_of(fleet::read_file_text(dir + "/run.log")));
    STOA_CHECK(Clock::now() < hub_deadline, ErrorKind::kInternal,
               "bench fleet: stoa run did not write ", hub_json, " within 300 s");
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(100ms);  // the file is written in one go; let it land
  const json info = json::parse(fleet::read_file_text(hub_json));
  const std::string hub_url = info.at("url").get<std::string>();
  const int hub_port = info.at("port").get<int>();

  fleet::VersionObserver observer(hub_url, kToken);
  std::vector<std::unique_ptr<net::LinkProxy>> proxies;
  const bool shaped_by_proxy = c.home && links == nullptr;
  for (int i = 0; i < o.workers; ++i) {
    net::LinkProxyOptions po;
    po.listen_host = (c.home && links) ? links->links()[i].host_ip : "127.0.0.1";
    po.target_port = hub_port;
    if (c.home) {
      po.one_way_delay = std::chrono::microseconds(static_cast<int64_t>(o.rtt_ms * 500));
      if (shaped_by_proxy) po.rate_bytes_per_s = o.rate_mbit * 1e6 / 8;
    }
    proxies.push_back(std::make_unique<net::LinkProxy>(po));
  }
  std::vector<uint64_t> veth_tx0, veth_rx0;
  if (c.home && links)
    for (const auto& l : links->links()) {
      veth_tx0.push_back(fleet::HomeLinks::dev_counter(l.host_dev, "tx_bytes"));
      veth_rx0.push_back(fleet::HomeLinks::dev_counter(l.host_dev, "rx_bytes"));
    }

  std::vector<std::unique_ptr<Child>> workers;
  const int64_t t_start = fleet::unix_ms();
  for (int i = 0; i < o.workers; ++i) {
    const std::string name = "w" + std::to_string(i);
    ChildSpec spec;
    spec.args = {"work",
                 "--verbose",  // the switch times are read from the detailed log
                 "--hub",       proxies[i]->url(),
                 "--token",     kToken,
                 "--model",     a.model,
                 "--index",     a.index,
                 "--name",      name,
                 "--state-dir", dir + "/" + name,
                 "--threads",   std::to_string(o.worker_threads),
                 "--slots",     std::to_string(o.slots),
                 "--seed",      std::to_string(i + 1),
                 "--grace",     "2"};
    spec.log_path = dir + "/" + name + ".log";
    if (c.home && links) spec.netns = links->links()[i].netns;
    workers.push_back(std::make_unique<Child>());
    workers.back()->start(exe, spec);
  }

  // ---- the window ----
  const auto window_end =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.seconds * 1000));
  auto next_progress = Clock::now() + 15s;
  while (Clock::now() < window_end) {
    check_interrupt();
    STOA_CHECK(run.running(), ErrorKind::kInternal, "bench fleet: stoa run died (", c.name, "):\n",
               fleet::tail_of(fleet::read_file_text(dir + "/run.log")));
    for (auto& w : workers)
      STOA_CHECK(w->running(), ErrorKind::kInternal, "bench fleet: a worker died (", c.name, "):\n",
                 fleet::tail_of(fleet::read_file_text(w->log_path())));
    if (Clock::now() >= next_progress) {
      next_progress += 15s;
      try {
        const json st = fetch_status(hub_url);
        log_info("bench", c.name, ": ", (fleet::unix_ms() - t_start) / 1000, " s, version ",
                 st.value("latest_version", json(nullptr)).dump(), ", step ", st.value("step", 0),
                 ", accepted ", st["counters"].value("rollouts_accepted", 0.0));
      } catch (const std::exception& e) {
        log_warn("bench", c.name, ": status: ", e.what());
      }
    }
    std::this_thread::sleep_for(100ms);
  }
  const int64_t t_end = fleet::unix_ms();
  const json status = fetch_status(hub_url);
  std::vector<net::LinkProxyCounters> bytes;
  for (auto& p : proxies) bytes.push_back(p->counters());
  uint64_t veth_down = 0, veth_up = 0;
  if (c.home && links)
    for (size_t i = 0; i < links->links().size(); ++i) {
      veth_down +=
          fleet::HomeLinks::dev_counter(links->links()[i].host_dev, "tx_bytes") - veth_tx0[i];
      veth_up +=
          fleet::HomeLinks::dev_counter(links->links()[i].host_dev, "rx_bytes") - veth_rx0[i];
    }
  observer.stop();

  // ---- stop everything: workers first (they release leases), then the hub + trainer ----
  double worker_cpu = 0;
  for (auto& w : workers) {
    w->terminate(15s);
    worker_cpu += w->cpu_seconds();
  }
  for (auto& p : proxies) p->stop();
  run.terminate(60s);

  // ---- figures ----
  const std::map<uint64_t, int64_t> all_published = observer.published();
  std::map<uint64_t, int64_t> published;
  for (const auto& [v, t] : all_published)
    if (t >= t_start && t <= t_end) published[v] = t;
  std::vector<std::vector<fleet::Switch>> switches;
  json per_worker = json::array();
  double idle_sum = 0;
  int idle_n = 0;
  double cold_start_max = 0;
  for (int i = 0; i < o.workers; ++i) {
    const fleet::WorkerLog wl =
        fleet::parse_worker_log(fleet::read_file_text(workers[i]->log_path()));
    switches.push_back(wl.switches);
    std::optional<double> idle = wl.idle;
    for (const auto& w : status.value("workers", json::array()))
      if (!idle && w.value("name", "") == "w" + std::to_string(i))
        idle = w.value("idle_fraction", 0.0);  // the last heartbeat's figure
    if (idle) {
      idle_sum += *idle;
      ++idle_n;
    }
    const double cold = wl.switches.empty()
                            ? std::nan("")
                            : static_cast<double>(wl.switches.front().unix_ms - t_start) / 1000;
    if (std::isfinite(cold)) cold_start_max = std::max(cold_start_max, cold);
    per_worker.push_back({{"name", "w" + std::to_string(i)},
                          {"idle_fraction", idle ? json(*idle) : json(nullptr)},
                          {"weight_switches", wl.switches.size()},
                          {"log_warnings", wl.warnings},
                          {"rollouts_finished", wl.rollouts ? json(*wl.rollouts) : json(nullptr)},
                          {"tokens", wl.tokens ? json(*wl.tokens) : json(nullptr)},
                          {"first_weights_s", num(cold)},
                          {"bytes_down", bytes[i].bytes_to_client},
                          {"bytes_up", bytes[i].bytes_to_target},
                          {"connections", bytes[i].connections}});
  }
  const fleet::SyncLatencies lat = fleet::sync_latencies(published, switches, t_end);
  const fleet::TrainerSummary tr =
      fleet::summarize_steps(fleet::read_file_text(dir + "/run/steps.jsonl"));
  const double window_s = static_cast<double>(t_end - t_start) / 1000;
  const double accepted = status["counters"].value("rollouts_accepted", 0.0);
  uint64_t down = 0, up = 0;
  for (const auto& b : bytes) {
    down += b.bytes_to_client;
    up += b.bytes_to_target;
  }
  json r = {{"name", c.name},
            {"link", c.home ? "home" : "loopback"},
            {"weights", c.full_int8 ? "full-int8 (anchor every version)" : "pulse"},
            {"window_s", window_s},
            {"trainer_busy_fraction", num(tr.busy_fraction)},
            {"worker_idle_fraction", idle_n ? json(idle_sum / idle_n) : json(nullptr)},
            {"sync_latency_ms",
             {{"p50", num(fleet::percentile(lat.ms, 50))},
              {"p95", num(fleet::percentile(lat.ms, 95))},
              {"max", num(lat.ms.empty() ? std::nan("")
                                         : *std::max_element(lat.ms.begin(), lat.ms.end()))},
              {"samples", lat.ms.size()},
              {"skipped_versions", lat.skipped},
              {"unsynced_at_end", lat.unsynced}}},
            {"versions_published", published.size()},
            {"trainer_steps", tr.steps},
            {"trainer_step_seconds_mean", num(tr.step_seconds_mean)},
            {"rollouts_accepted", accepted},
            {"rollouts_per_s", accepted / window_s},
            {"first_weights_s_max", cold_start_max},
            {"bytes_on_wire",
             {{"down", down},
              {"up", up},
              {"down_per_s", static_cast<double>(down) / window_s},
              {"counted_by", "delay proxy (payload)"}}},
            {"patch_bytes_mean", num(tr.patch_bytes_mean)},
            {"anchor_bytes_mean", num(tr.anchor_bytes_mean)},
            {"anchors_published", tr.anchors},
            {"cpu_seconds", {{"run", run.cpu_seconds()}, {"workers", worker_cpu}}},
            {"workers", per_worker}};
  if (c.home && links) {
    r["bytes_on_wire"]["veth_down"] = veth_down;
    r["bytes_on_wire"]["veth_up"] = veth_up;
  }
  return r;
}

}  // namespace

int run_fleet_bench(const FleetBenchOptions& o) {
  STOA_CHECK(o.seconds >= 10, ErrorKind::kInvalidArgument, "bench fleet: --seconds must be >= 10");
  STOA_CHECK(o.workers >= 1 && o.workers <= 32, ErrorKind::kInvalidArgument,
             "bench fleet: --workers must be 1..32");
  std::vector<ConfigSpec> specs;
  {
    std::stringstream ss(o.configs);
    std::string name;
    while (std::getline(ss, name, ',')) {
      ConfigSpec s{name, false, false};
      if (name == "loopback-pulse") {
      } else if (name == "loopback-int8") {
        s.full_int8 = true;
      } else if (name == "home-pulse") {
        s.home = true;
      } else if (name == "home-int8") {
        s.home = s.full_int8 = true;
      } else {
        fail(ErrorKind::kInvalidArgument, "bench fleet: --configs: unknown configuration '", name,
             "' (loopback-pulse, loopback-int8, home-pulse, home-int8)");
      }
      specs.push_back(s);
    }
  }
  const std::string exe = fleet::self_exe();
  std::string base = o.dir;
  if (base.empty()) base = "/tmp/stoa-bench-fleet-" + std::to_string(::getpid());
  fs::create_directories(base);
  std::signal(SIGINT, interrupt_bench_fleet);
  std::signal(SIGTERM, interrupt_bench_fleet);

  const std::array<double, 3> load_start = load_averages();
  const fleet::Assets assets =
      fleet::prepare_assets(o, exe, o.assets.empty() ? base + "/assets" : o.assets, g_interrupted);

  std::unique_ptr<fleet::HomeLinks> links;
  bool any_home = false;
  for (const auto& s : specs) any_home |= s.home;
  std::string netns_error;
  if (any_home) {
    try {
      links = std::make_unique<fleet::HomeLinks>(o.workers, o.rate_mbit);
    } catch (const Error& e) {
      netns_error = e.what();
      log_warn("bench", e.what(), "; falling back to the proxy's own rate limit");
    }
  }

  json out = {{"bench", "fleet"},
              {"seconds_per_config", o.seconds},
              {"workers", o.workers},
              {"worker_threads", o.worker_threads},
              {"worker_slots", o.slots},
              {"trainer_threads", o.trainer_threads},
              {"model",
               {{"preset", o.preset.empty() ? "fleet (bench's own LFM2)" : o.preset},
                {"dir", assets.model},
                {"parameters", assets.params},
                {"config", json::parse(fleet::read_file_text(assets.model + "/config.json"))}}},
              {"home_link", {{"rate_mbit_each_way", o.rate_mbit}, {"rtt_ms", o.rtt_ms}}},
              {"link_emulation", any_home ? link_emulation_name(links != nullptr) : "none"},
              {"load_average_start", load_start}};
  if (!netns_error.empty()) out["netns_error"] = netns_error;
  json results = json::array();
  for (const auto& s : specs) {
    results.push_back(run_config(o, exe, assets, s, base, s.home ? links.get() : nullptr));
    if (!o.json_out) std::fprintf(stderr, "%s\n", results.back().dump().c_str());
  }
  links.reset();
  out["configs"] = results;
  out["load_average_end"] = load_averages();
  if (!o.keep && o.dir.empty()) fs::remove_all(base);

  if (o.json_out) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-15s %7s %7s %9s %9s %9s %10s %12s %8s\n", "config", "busy", "idle", "sync p50",
              "sync p95", "versions", "rollout/s", "down MB", "up MB");
  for (const auto& r : results) {
    auto f = [](const json& v, double scale = 1) {
      return v.is_number() ? v.get<double>() * scale : std::nan("");
    };
    std::printf("%-15s %7.2f %7.2f %7.0fms %7.0fms %9d %10.2f %12.2f %8.2f\n",
                r["name"].get<std::string>().c_str(), f(r["trainer_busy_fraction"]),
                f(r["worker_idle_fraction"]), f(r["sync_latency_ms"]["p50"]),
                f(r["sync_latency_ms"]["p95"]), r["versions_published"].get<int>(),
                f(r["rollouts_per_s"]), f(r["bytes_on_wire"]["down"], 1e-6),
                f(r["bytes_on_wire"]["up"], 1e-6));
  }
  std::printf("link emulation: %s; load average %.2f -> %.2f\n",
              out["link_emulation"].get<std::string>().c_str(), load_start[0],
              out["load_average_end"][0].get<double>());
  return 0;
}

}  // namespace stoa::app
