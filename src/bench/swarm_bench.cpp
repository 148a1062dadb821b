#include "bench/swarm_bench.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/fleet/fleet_metrics.h"
#include "bench/bench_task.h"
#include "bench/scale_process.h"
#include "core/error.h"
#include "core/log.h"
#include "core/machine.h"
#include "core/process.h"
#include "core/rng.h"
#include "net/netem/emulated_internet.h"
#include "net/netem/netns.h"
#include "net/protocol.h"
#include "pulse/catalog.h"
#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse/publisher.h"
#include "roles/hub/http/server.h"

namespace stoa::bench {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kRows = 1024, kCols = 4096;

// The bench's links: tbf on a bridge (swarm_links.h), or the link emulator (net/netem).
class BenchLinks {
 public:
  BenchLinks(int workers, const SwarmBenchOptions& o) {
    if (!o.netem) {
      tbf_ = std::make_unique<SwarmLinks>(workers, o.rates);
      return;
    }
    using namespace std::chrono;
    const auto rtt = duration_cast<microseconds>(duration<double, std::milli>(o.rtt_ms));
    const auto jitter = duration_cast<microseconds>(duration<double, std::milli>(o.jitter_ms));
    const net::netem::NatKind kind = net::netem::parse_nat_kind(o.nat);
    net::netem::InternetOptions io;
    io.hub.up.rate_mbit = o.rates.hub_up_mbit;
    for (int i = 0; i < workers; ++i) {
      const bool natted = std::floor((i + 1) * o.natted) > std::floor(i * o.natted);
      io.hosts.push_back(net::netem::HostLink::home(o.rates.down_mbit, o.rates.up_mbit, rtt, jitter,
                                                    o.loss,
                                                    natted ? kind : net::netem::NatKind::kNone));
    }
    netem_ = std::make_unique<net::netem::EmulatedInternet>(io);
  }
  std::string hub_ip() const {
    return netem_ ? net::netem::EmulatedInternet::kHubIp : SwarmLinks::kHubIp;
  }
  std::string netns(int i) const { return netem_ ? netem_->netns(i) : tbf_->netns(i); }
  std::string ip(int i) const { return netem_ ? netem_->local_ip(i) : tbf_->ip(i); }
  int natted() const {
    int n = 0;
    for (size_t i = 0; netem_ && i < netem_->hosts(); ++i)
      n += netem_->nat(i) != net::netem::NatKind::kNone;
    return n;
  }
  uint64_t hub_tx_bytes() const {
    return netem_ ? netem_->hub_counters().up.bytes : tbf_->hub_tx_bytes();
  }
  // Starts the hub's server where the workers reach it: its listening socket is made in the
  // hub's namespace when the links are the emulator's.
  void start(hub::HubServer& server) const {
    if (netem_) {
      net::netem::run_in_netns(netem_->hub_netns(), [&] { server.start(); });
    } else {
      server.start();
    }
  }

 private:
  std::unique_ptr<SwarmLinks> tbf_;
  std::unique_ptr<net::netem::EmulatedInternet> netem_;
};

Int8Matrix random_matrix(Rng& rng) {
  Int8Matrix m;
  m.rows = kRows;
  m.cols = kCols;
  m.values.resize(static_cast<size_t>(kRows * kCols));
  for (auto& v : m.values) v = static_cast<int8_t>(rng.next());
  m.scales.resize(static_cast<size_t>(kRows * kCols / 32));
  for (auto& s : m.scales) s = static_cast<uint16_t>(0x2000 + rng.next() % 0x0c00);  // f16, ~1e-3
  return m;
}

// The next version: `fraction` of the int8 values moved by one grid step.
pulse::Int8State changed(const pulse::Int8State& from, double fraction, uint64_t seed) {
  Rng rng(seed, 7);
  pulse::Int8State to;
  to.set_config_hash(from.config_hash());
  to.set_version(from.version() + 1);
  const uint64_t threshold = static_cast<uint64_t>(fraction * 18446744073709551615.0);
  for (const auto& [name, t] : from.tensors()) {
    Int8Matrix q = t.q;
    for (auto& v : q.values)
      if (rng.next() < threshold) v = static_cast<int8_t>(v == 127 ? 126 : v + 1);
    to.add_int8(name, std::move(q));
  }
  return to;
}

// A worker process and the times it said it held each version.
struct BenchWorker {
  std::mutex mutex;
  std::condition_variable changed;
  bool joined = false;
  std::map<uint64_t, Clock::time_point> held;
  std::string last_line;
  std::unique_ptr<ChildProcess> process;

  void line(const std::string& l) {
    std::lock_guard lock(mutex);
    last_line = l;
    if (l.rfind("joined ", 0) == 0) joined = true;
    const std::string prefix = "holding version ";
    if (l.rfind(prefix, 0) == 0) held[std::stoull(l.substr(prefix.size()))] = Clock::now();
    changed.notify_all();
  }
};

struct Phase {
  std::vector<double> seconds;  // per worker, from the publish
  uint64_t hub_bytes = 0;
  // The hub's own count of what its web seed let out, and of that what went again because no
  // copy of a piece had left for the reseed wait, and what it allowed but did not send (the
  // worker closed first). The rest of hub_bytes is frames, headers and the tracker.
  uint64_t web_seed_bytes = 0, web_seed_resent_bytes = 0, web_seed_cut_bytes = 0;
  // What the workers' fetch allowance refused (docs/design/hub.md): an honest swarm meets none.
  uint64_t allowance_refusals = 0, allowance_refused_bytes = 0;
};

json phase_json(const Phase& p, uint64_t blob_bytes) {
  using app::fleet::percentile;
  return {
      {"p50_s", percentile(p.seconds, 50)},
      {"p95_s", percentile(p.seconds, 95)},
      {"max_s", p.seconds.empty() ? 0.0 : *std::max_element(p.seconds.begin(), p.seconds.end())},
      {"hub_bytes_out", p.hub_bytes},
      {"hub_bytes_per_blob", static_cast<double>(p.hub_bytes) / static_cast<double>(blob_bytes)},
      {"web_seed_bytes", p.web_seed_bytes},
      {"web_seed_resent_bytes", p.web_seed_resent_bytes},
      {"web_seed_cut_bytes", p.web_seed_cut_bytes},
      {"fetch_allowance_refusals", p.allowance_refusals},
      {"fetch_allowance_refused_bytes", p.allowance_refused_bytes}};
}

}  // namespace

int run_swarm_bench(const SwarmBenchOptions& o) {
  STOA_CHECK(!o.workers.empty(), ErrorKind::kInvalidArgument, "bench swarm: no worker counts");
  const int most = *std::max_element(o.workers.begin(), o.workers.end());
  STOA_CHECK(most >= 1 && most <= 1000, ErrorKind::kInvalidArgument,
             "bench swarm: worker counts must be 1..1000");
  STOA_CHECK(o.upload == "auto" || (!o.upload.empty() && o.upload.size() <= 9 &&
                                    o.upload.find_first_not_of("0123456789") == std::string::npos),
             ErrorKind::kInvalidArgument, "bench swarm: --upload is KiB/s or auto, not '", o.upload,
             "'");
  const fs::path dir =
      o.workdir.empty()
          ? fs::current_path() / (".stoa-bench-swarm-" + net::random_token().substr(0, 8))
          : fs::path(o.workdir);
  fs::create_directories(dir);
  const std::string self = self_executable();
  const auto timeout = std::chrono::duration<double>(o.timeout_s);

  // ---- the blobs: an anchor of anchor_mb and a patch of about patch_mb ----
  pulse::Int8State state;
  state.set_version(1);
  state.set_config_hash(hash_bytes("stoa bench swarm", 16));
  Rng rng(2026, 1);
  const int tensors = std::max(
      1, static_cast<int>(std::lround(o.anchor_mb * (1 << 20) / (kRows * kCols * 1.0625))));
  for (int i = 0; i < tensors; ++i)
    state.add_int8("blk." + std::to_string(i) + ".weight", random_matrix(rng));
  const std::vector<uint8_t> anchor = pulse::encode_anchor(state);
  double fraction = 0.02;
  std::vector<uint8_t> patch;
  pulse::Int8State next;
  for (int attempt = 0; attempt < 3; ++attempt) {  // the patch's size is near-linear in it
    next = changed(state, fraction, 11);
    patch = pulse::encode_patch(pulse::make_patch(state, next));
    const double got_mb = static_cast<double>(patch.size()) / (1 << 20);
    if (std::abs(got_mb - o.patch_mb) < 0.05 * o.patch_mb || fraction >= 1) break;
    fraction = std::min(1.0, fraction * o.patch_mb / got_mb);
  }
  log_info("bench", "anchor ", anchor.size(), " bytes, patch ", patch.size(), " bytes (",
           fraction * 100, " % of values changed)");

  BenchLinks links(most, o);
  json runs = json::array();
  for (const std::string& mode : o.modes) {
    STOA_CHECK(mode == "peers" || mode == "hub", ErrorKind::kInvalidArgument, "bench swarm: mode '",
               mode, "' is not peers or hub");
    for (const int n : o.workers) {
      const fs::path run_dir = dir / (mode + "-" + std::to_string(n));
      fs::remove_all(run_dir);
      fs::create_directories(run_dir);
      BenchTask world(run_dir, 4);
      pulse::BlobStore& store = world.store();
      const Hash128 anchor_hash = store.put(anchor), patch_hash = store.put(patch);
      const pulse::CatalogEntry anchor_entry{pulse::BlobKind::kAnchor, 1, 1, anchor_hash,
                                             anchor.size()};
      const pulse::CatalogEntry patch_entry{pulse::BlobKind::kPatch, 1, 2, patch_hash,
                                            patch.size()};
      // The catalog names a version only once it is published: the hub routes from it. Empty
      // while the workers join (without a file the hub would scan the store and find both
      // versions: the workers would start fetching before the publish, outside its clock and
      // its byte count).
      const std::string catalog_path = (run_dir / "blobs" / "catalog.json").string();
      pulse::Catalog catalog;
      catalog.save(catalog_path);
      hub::HubConfig hc;
      hc.ledger_path = (run_dir / "ledger.sqlite").string();
      hc.join_token = "swarm-bench-token";
      hc.max_staleness = 1000;
      hc.heartbeat_interval_s = 60;
      hc.worker_idle_expiry_ms = 3'600'000;
      hc.swarm_web_seed_copies = o.web_seed_copies;
      hc.swarm_web_seed_budget = o.web_seed_budget;
      hc.swarm_reseed_after_s = o.reseed_after_s;
      hub::Hub hub(hc, world.deps());
      hub::ServerOptions so;
      so.host = links.hub_ip();
      so.threads = 4;
      hub::HubServer server(hub, so);
      links.start(server);
      const std::string url = server.url();

      std::vector<std::unique_ptr<BenchWorker>> workers;
      for (int i = 0; i < n; ++i) {
        auto w = std::make_unique<BenchWorker>();
        BenchWorker* raw = w.get();
        std::vector<std::string> argv{"ip",
                                      "netns",
                                      "exec",
                                      links.netns(i),
                                      self,
                                      "work",
                                      "--sync-only",
                                      "--hub",
                                      url,
                                      "--token",
                                      hc.join_token,
                                      "--name",
                                      "bench-" + std::to_string(i),
                                      "--state-dir",
                                      (run_dir / ("w" + std::to_string(i))).string(),
                                      "--swarm",
                                      mode == "peers" ? "on" : "off",
                                      "--swarm-listen",
                                      links.ip(i) + ":6881"};
        if (o.upload != "auto") argv.insert(argv.end(), {"--upload", o.upload});
        w->process = std::make_unique<ChildProcess>(
            argv, (run_dir / ("w" + std::to_string(i) + ".log")).string(),
            [raw](const std::string& line) { raw->line(line); });
        workers.push_back(std::move(w));
      }
      auto wait_all = [&](const char* what, auto&& done) {
        const auto deadline = Clock::now() + timeout;
        for (auto& w : workers) {
          std::unique_lock lock(w->mutex);
          const bool ok = w->changed.wait_until(lock, deadline, [&] { return done(*w); });
          STOA_CHECK(ok, ErrorKind::kInternal, "bench swarm (", mode, ", ", n,
                     " workers): a worker did not ", what,
                     " in time; its last line: ", w->last_line);
        }
      };
      wait_all("join", [](BenchWorker& w) { return w.joined; });
      // From here to the workers' exit: what the machine spent on the two blobs (whether N
      // processes on its cores, rather than the links, set the pace).
      const auto synced_from = Clock::now();
      const double hub_cpu_from = process_cpu_seconds();
      auto publish = [&](uint64_t version, const pulse::CatalogEntry& entry,
                         const Hash128& state_hash) {
        const uint64_t before = links.hub_tx_bytes();
        const hub::SwarmTrackerStats seed_before =
            server.swarm_stats().value_or(hub::SwarmTrackerStats{});
        const hub::FetchAllowanceStats allowance_before = server.fetch_stats();
        const auto at = Clock::now();
        pulse::Published p;
        p.version = version;
        (entry.kind == pulse::BlobKind::kAnchor ? p.anchor : p.patch) = entry;
        hub.publish_version(p, state_hash);
        wait_all("hold the version", [&](BenchWorker& w) { return w.held.count(version) != 0; });
        Phase phase;
        phase.hub_bytes = links.hub_tx_bytes() - before;
        const hub::SwarmTrackerStats seed_after =
            server.swarm_stats().value_or(hub::SwarmTrackerStats{});
        phase.web_seed_bytes = seed_after.web_seed_bytes - seed_before.web_seed_bytes;
        phase.web_seed_resent_bytes =
            seed_after.web_seed_resent_bytes - seed_before.web_seed_resent_bytes;
        phase.web_seed_cut_bytes = seed_after.web_seed_cut_bytes - seed_before.web_seed_cut_bytes;
        const hub::FetchAllowanceStats allowance_after = server.fetch_stats();
        phase.allowance_refusals = allowance_after.refusals - allowance_before.refusals;
        phase.allowance_refused_bytes =
            allowance_after.refused_bytes - allowance_before.refused_bytes;
        for (auto& w : workers) {
          std::lock_guard lock(w->mutex);
          phase.seconds.push_back(std::chrono::duration<double>(w->held.at(version) - at).count());
        }
        return phase;
      };
      catalog.add(anchor_entry);
      catalog.save(catalog_path);
      const Phase anchor_phase = publish(1, anchor_entry, state.state_hash());
      catalog.add(patch_entry);
      catalog.save(catalog_path);
      const Phase patch_phase = publish(2, patch_entry, next.state_hash());
      json from_peers = 0, from_hub = 0, fallbacks = 0;
      uint64_t peers_sum = 0, hub_sum = 0, fallback_sum = 0;
      std::vector<double> upload_caps;  // KiB/s, each worker's
      const double synced_s = std::chrono::duration<double>(Clock::now() - synced_from).count();
      const double hub_cpu_s = process_cpu_seconds() - hub_cpu_from;
      double workers_cpu_s = 0;  // their whole lives: the join and exit too
      for (auto& w : workers) w->process->signal(SIGTERM);  // all at once: each takes seconds
      for (auto& w : workers) {
        workers_cpu_s += w->process->wait(std::chrono::seconds(30)).cpu_seconds;
        std::lock_guard lock(w->mutex);
        try {
          const json last = json::parse(w->last_line);
          if (last.contains("swarm") && last["swarm"].is_object()) {
            peers_sum += last["swarm"].value("from_peers_bytes", uint64_t{0});
            hub_sum += last["swarm"].value("from_hub_bytes", uint64_t{0});
            fallback_sum += last["swarm"].value("fallbacks", uint64_t{0});
            upload_caps.push_back(last["swarm"].value("upload_kib_s", 0.0));
          }
        } catch (const std::exception&) {
          log_warn("bench", "a worker's last line is not its JSON summary: ", w->last_line);
        }
      }
      server.stop();
      json run = {{"mode", mode},
                  {"workers", n},
                  {"anchor", phase_json(anchor_phase, anchor.size())},
                  {"patch", phase_json(patch_phase, patch.size())},
                  {"cpu",
                   {{"both_phases_s", synced_s},
                    {"hub_cpu_s", hub_cpu_s},
                    {"workers_cpu_s", workers_cpu_s},
                    {"cores", std::thread::hardware_concurrency()}}}};
      if (mode == "peers")
        run["worker_payload"] = {
            {"from_peers_bytes", peers_sum},
            {"from_hub_bytes", hub_sum},
            {"fallbacks", fallback_sum},
            {"upload_cap_kib_s",
             {{"min", upload_caps.empty()
                          ? 0.0
                          : *std::min_element(upload_caps.begin(), upload_caps.end())},
              {"p50", app::fleet::percentile(upload_caps, 50)},
              {"max", upload_caps.empty()
                          ? 0.0
                          : *std::max_element(upload_caps.begin(), upload_caps.end())}}}};
      log_info("bench", run.dump());
      if (!o.json)
        std::printf(
            "%-5s N=%-3d anchor p50 %6.1f s p95 %6.1f s hub %5.2fx | patch p50 %6.1f s p95 %6.1f s "
            "hub %5.2fx\n",
            mode.c_str(), n, run["anchor"]["p50_s"].get<double>(),
            run["anchor"]["p95_s"].get<double>(), run["anchor"]["hub_bytes_per_blob"].get<double>(),
            run["patch"]["p50_s"].get<double>(), run["patch"]["p95_s"].get<double>(),
            run["patch"]["hub_bytes_per_blob"].get<double>());
      std::fflush(stdout);
      runs.push_back(run);
      fs::remove_all(run_dir / "blobs");  // the workers' dirs hold what they fetched: kept if asked
      if (!o.keep) fs::remove_all(run_dir);
    }
  }
  // The floor physics sets: N copies through the hub's uplink plus every worker's uplink.
  const auto floor_s = [&](double bytes, int n) {
    const double single = bytes * 8 / 1e6 / std::min(o.rates.hub_up_mbit, o.rates.down_mbit);
    const double swarm = n * bytes * 8 / 1e6 / (o.rates.hub_up_mbit + n * o.rates.up_mbit);
    return std::max(single, swarm);
  };
  json floors = json::object();
  for (const int n : o.workers)
    floors[std::to_string(n)] = {{"anchor_s", floor_s(static_cast<double>(anchor.size()), n)},
                                 {"patch_s", floor_s(static_cast<double>(patch.size()), n)}};
  const json report = {
      {"bench", "swarm"},
      {"rates_mbit",
       {{"hub_up", o.rates.hub_up_mbit}, {"down", o.rates.down_mbit}, {"up", o.rates.up_mbit}}},
      {"links", o.netem ? json{{"emulator", "net/netem"},
                               {"rtt_ms", o.rtt_ms},
                               {"jitter_ms", o.jitter_ms},
                               {"loss", o.loss},
                               {"nat", o.nat},
                               {"natted_workers", links.natted()},
                               {"of_workers", most}}
                        : json{{"emulator", "tbf on a bridge"}, {"latency", "not emulated"}}},
      {"hub",
       {{"web_seed_copies", o.web_seed_copies},
        {"web_seed_budget", o.web_seed_budget},
        {"reseed_after_s", o.reseed_after_s}}},
      {"workers_upload", o.upload},
      {"anchor_bytes", anchor.size()},
      {"patch_bytes", patch.size()},
      {"patch_changed_fraction", fraction},
      {"runs", runs},
      {"swarm_floor_s", floors},
      {"load_average_1m", load_average_1m()},
  };
  if (o.json) std::printf("%s\n", report.dump(2).c_str());
  if (!o.keep) fs::remove_all(dir);
  return 0;
}

}  // namespace stoa::bench
