#include "bench/scale_bench.h"

#include <signal.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/bench_task.h"
#include "bench/group_drain.h"
#include "bench/scale_model.h"
#include "bench/scale_process.h"
#include "bench/scale_version.h"
#include "core/error.h"
#include "core/log.h"
#include "core/process.h"
#include "model/config.h"
#include "model/weights.h"
#include "net/http_client.h"
#include "net/link_proxy.h"
#include "net/protocol.h"
#include "net/spool_download.h"
#include "pulse/format.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub.h"

namespace stoa::bench {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

json phase(uint64_t peak_rss_bytes, double seconds) {
  return {{"peak_rss_bytes", peak_rss_bytes}, {"seconds", seconds}};
}

// What the worker reported, by its log lines: when it started generating with each version,
// and its memory at that moment.
class WorkerLog {
 public:
  void line(const std::string& text) {
    std::lock_guard lock(mutex_);
    tail_.push_back(text);
    if (tail_.size() > 40) tail_.pop_front();
    const std::string key = "generating with version ";
    const size_t at = text.find(key);
    if (at == std::string::npos) return;
    const uint64_t version = std::strtoull(text.c_str() + at + key.size(), nullptr, 10);
    seen_[version] = {Clock::now(), read_process_memory(pid_)};
    cv_.notify_all();
  }
  void set_pid(pid_t pid) { pid_ = pid; }

  struct Event {
    Clock::time_point at;
    ProcessMemory memory;
  };
  // Waits until the worker generates with `version`; throws when it exits or time runs out.
  Event wait_for(uint64_t version, double timeout_s) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    std::unique_lock lock(mutex_);
    while (!seen_.count(version)) {
      STOA_CHECK(Clock::now() < deadline && process_alive(pid_), ErrorKind::kInternal,
                 "stoa bench scale: the worker did not reach version ", version,
                 process_alive(pid_) ? " in time" : " (it exited)", "; its last lines:\n",
                 tail_locked());
      cv_.wait_for(lock, std::chrono::milliseconds(200));
    }
    return seen_[version];
  }
  std::string tail() {
    std::lock_guard lock(mutex_);
    return tail_locked();
  }

 private:
  std::string tail_locked() const {
    std::string s;
    for (const auto& l : tail_) s += "  " + l + "\n";
    return s;
  }
  std::atomic<pid_t> pid_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::string> tail_;
  std::map<uint64_t, Event> seen_;
};

// The phase's peak: the worker's VmHWM when it rose during the phase (the true peak), else the
// largest VmRSS sampled in it.
uint64_t phase_peak(uint64_t hwm_before, uint64_t hwm_after, uint64_t sampled) {
  return hwm_after > hwm_before ? hwm_after : sampled;
}

Hash128 hash_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  StateHasher h;
  std::vector<char> buffer(size_t{1} << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0) h.add_bytes(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  return h.finish();
}

}  // namespace

int run_scale_bench(const ScaleBenchOptions& o) {
  const bool temp = o.workdir.empty();
  const fs::path dir =
      fs::absolute(temp ? fs::path(".stoa-bench-scale-" + net::random_token().substr(0, 8))
                        : fs::path(o.workdir));
  fs::create_directories(dir);
  struct RemoveDir {
    fs::path dir;
    bool remove;
    ~RemoveDir() {
      std::error_code ec;
      if (remove) fs::remove_all(dir, ec);
    }
  } remove_dir{dir, !o.keep};
  const std::string self = self_executable();
  const auto timeout = std::chrono::seconds(static_cast<int64_t>(o.timeout_s));

  // ---- make_model: `stoa model init --dtype q8_0` in a child ----
  const ModelConfig config = scale_config(o.preset, o.layers);
  const fs::path model_dir = dir / "model";
  fs::remove_all(model_dir);
  const std::string config_path = (dir / "config.json").string();
  {
    std::ofstream out(config_path);
    out << model_config_to_json(config).dump(2);
  }
  std::string make_log;
  // Byte tokens by intent: the bench measures weights, and its task needs no tokenizer.
  const ChildResult made =
      run_child({self, "model", "init", "--config", config_path, "--dtype", "q8_0", "--seed", "1",
                 "--tokenizer", "bytes", "--out", model_dir.string()},
                &make_log, timeout);
  STOA_CHECK(made.exit_status == 0, ErrorKind::kInternal,
             "stoa bench scale: stoa model init failed (status ", made.exit_status, "):\n",
             make_log);
  const uint64_t gguf_bytes = fs::file_size(model_dir / kModelGgufName);
  log_info("bench", "model made: ", gguf_bytes, " bytes in ", made.seconds, " s, peak RSS ",
           made.max_rss_bytes);

  // ---- the hub, publishing the anchor ----
  BenchTask world(dir, 16);
  pulse::BlobStore& store = world.store();
  const std::string catalog_path = (dir / "blobs" / "catalog.json").string();
  pulse::Catalog catalog;
  const AnchorFromModel anchor = write_anchor_from_model(model_dir.string(), store, 1);
  catalog.add(anchor.entry);
  catalog.save(catalog_path);
  log_info("bench", "anchor written: ", anchor.entry.bytes, " bytes in ", anchor.seconds,
           " s (int8 view ", anchor.int8_bytes, " bytes)");

  hub::HubConfig hc;
  hc.ledger_path = (dir / "ledger.sqlite").string();
  fs::remove(hc.ledger_path);
  hc.join_token = "scale-bench-token";
  hc.group_size = 2;
  hc.sampling.max_new_tokens = o.tokens;
  hc.sampling.max_turns = 1;
  hc.max_staleness = 1000;
  hc.heartbeat_interval_s = 2;
  hc.lease_ttl_ms = static_cast<int64_t>(o.timeout_s * 1000);
  hc.lease_max_ms = 2 * hc.lease_ttl_ms;
  hub::Hub hub(hc, world.deps(config.vocab_size));
  hub::HubServer server(hub, hub::ServerOptions{});
  server.start();
  {
    pulse::Published p;
    p.version = 1;
    p.anchor = anchor.entry;
    hub.publish_version(p, anchor.state_hash);
  }
  // The trainer: takes complete groups; the first one ends the generate phase.
  GroupDrain trainer(hub, 16);
  struct StopHub {
    hub::Hub& hub;
    GroupDrain& trainer;
    hub::HubServer& server;
    ~StopHub() {
      hub.stop();
      trainer.stop();
      server.stop();
    }
  } stop_hub{hub, trainer, server};

  // ---- the worker process: anchor_load, generate ----
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  WorkerLog wlog;
  const auto worker_start = Clock::now();
  std::unique_ptr<ChildProcess> worker;
  std::unique_ptr<RssSampler> sampler;
  json anchor_load = nullptr, generate = nullptr, patch_apply = nullptr;
  if (o.worker) {
    worker = std::make_unique<ChildProcess>(std::vector<std::string>{self,
                                                                     "work",
                                                                     "--verbose",
                                                                     "--hub",
                                                                     url,
                                                                     "--token",
                                                                     hc.join_token,
                                                                     "--model",
                                                                     model_dir.string(),
                                                                     "--index",
                                                                     (dir / "index").string(),
                                                                     "--threads",
                                                                     std::to_string(o.threads),
                                                                     "--slots",
                                                                     "2",
                                                                     "--state-dir",
                                                                     (dir / "worker").string(),
                                                                     "--name",
                                                                     "scale-bench",
                                                                     "--seed",
                                                                     "1"},
                                            (dir / "worker.log").string(),
                                            [&](const std::string& line) { wlog.line(line); });
    wlog.set_pid(worker->pid());
    sampler = std::make_unique<RssSampler>(worker->pid(), std::chrono::milliseconds(20));
    const WorkerLog::Event loaded = wlog.wait_for(1, o.timeout_s);
    anchor_load = phase(loaded.memory.hwm_bytes,
                        std::chrono::duration<double>(loaded.at - worker_start).count());
    sampler->take_peak();
    const auto generate_deadline = Clock::now() + timeout;
    while (trainer.groups_taken() == 0) {
      STOA_CHECK(
          Clock::now() < generate_deadline && process_alive(worker->pid()), ErrorKind::kInternal,
          "stoa bench scale: no complete group from the worker; its last lines:\n", wlog.tail());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const ProcessMemory after_generate = read_process_memory(worker->pid());
    generate =
        phase(phase_peak(loaded.memory.hwm_bytes, after_generate.hwm_bytes, sampler->take_peak()),
              std::chrono::duration<double>(Clock::now() - loaded.at).count());
  }

  // ---- one PULSE version, made tensor by tensor, published as a patch ----
  SimulatedVersionOptions vo;
  vo.lr = o.lr;
  SimulatedVersion version = make_simulated_version(store.path_of(anchor.entry.hash), vo);
  const double encode0 = thread_cpu_seconds();
  const std::vector<uint8_t> patch_blob = pulse::encode_patch(version.patch);
  const double encode_seconds = thread_cpu_seconds() - encode0;
  const Hash128 patch_hash = store.put(patch_blob);
  const pulse::CatalogEntry patch_entry{pulse::BlobKind::kPatch, 1, 2, patch_hash,
                                        patch_blob.size()};
  catalog.add(patch_entry);
  catalog.save(catalog_path);
  const ProcessMemory before_patch = worker ? read_process_memory(worker->pid()) : ProcessMemory{};
  if (sampler) sampler->take_peak();
  const auto published_at = Clock::now();
  {
    pulse::Published p;
    p.version = 2;
    p.patch = patch_entry;
    hub.publish_version(p, version.patch.result_state_hash);
  }
  json apply_seconds = nullptr, worker_peak = nullptr, worker_exit = nullptr;
  if (worker) {
    const WorkerLog::Event patched = wlog.wait_for(2, o.timeout_s);
    const double seconds = std::chrono::duration<double>(patched.at - published_at).count();
    apply_seconds = seconds;
    patch_apply =
        phase(phase_peak(before_patch.hwm_bytes, patched.memory.hwm_bytes, sampler->take_peak()),
              seconds);
    const uint64_t peak = read_process_memory(worker->pid()).hwm_bytes;
    sampler.reset();
    worker->signal(SIGTERM);
    const ChildResult end = worker->wait(std::chrono::seconds(60));
    worker_peak = std::max(peak, end.max_rss_bytes);
    worker_exit = end.exit_status;
  }

  // ---- a resumed download of the anchor through the cutting proxy ----
  const uint64_t cut_bytes = static_cast<uint64_t>(o.cut_mb * 1024 * 1024);
  net::LinkProxyOptions link;
  link.target_port = server.port();
  link.cut_after_bytes = cut_bytes;
  net::LinkProxy proxy(link);
  net::JoinRequest jr;
  jr.name = "scale-bench-download";
  const net::JoinResponse session = hub.join(hc.join_token, jr, "127.0.0.1");
  net::HttpClient http("http://127.0.0.1:" + std::to_string(proxy.port()));
  http.set_bearer_token(session.session_token);
  net::DownloadOptions dop;
  dop.backoff_base = std::chrono::milliseconds(5);
  const std::string spool = (dir / "download.spool").string();
  const auto download_start = Clock::now();
  const net::DownloadStats ds =
      net::download_to_spool(http, "/v1/blobs/" + anchor.entry.hash.hex(), spool, dop);
  const double download_seconds = since(download_start);
  STOA_CHECK(hash_file(spool) == anchor.entry.hash, ErrorKind::kIntegrity,
             "stoa bench scale: the download through the proxy does not hash to the anchor");
  net::remove_spool(spool);

  const std::array<double, 3> load = load_averages();
  const double changed_fraction =
      static_cast<double>(version.stats.changed) / static_cast<double>(version.stats.values);
  json report = {{"preset", o.preset},
                 {"layers", config.num_layers},
                 {"int8_bytes", anchor.int8_bytes},
                 {"gguf_bytes", gguf_bytes},
                 {"anchor_bytes", anchor.entry.bytes},
                 {"anchor_write_seconds", anchor.seconds},
                 {"phases",
                  {{"make_model", phase(made.max_rss_bytes, made.seconds)},
                   {"anchor_load", anchor_load},
                   {"generate", generate},
                   {"patch_apply", patch_apply}}},
                 {"worker_peak_rss_bytes", worker_peak},
                 {"worker_exit_status", worker_exit},
                 {"worker_threads", o.threads},
                 {"pulse",
                  {{"changed_fraction", changed_fraction},
                   {"changed_values", version.stats.changed},
                   {"rescaled_groups", version.stats.rescaled_groups},
                   {"patch_bytes", patch_blob.size()},
                   {"make_seconds", version.make_cpu_seconds + encode_seconds},
                   {"make_diff_seconds", version.make_cpu_seconds},
                   {"encode_seconds", encode_seconds},
                   {"simulate_seconds", version.simulate_cpu_seconds},
                   {"make_wall_seconds", version.wall_seconds},
                   {"apply_seconds", apply_seconds},
                   {"lr", o.lr}}},
                 {"download",
                  {{"blob_bytes", anchor.entry.bytes},
                   {"bytes_transferred", proxy.counters().bytes_to_client},
                   {"body_bytes_received", ds.bytes_transferred},
                   {"cuts", proxy.counters().cuts},
                   {"cut_every_bytes", cut_bytes},
                   {"requests", ds.requests},
                   {"resumes", ds.resumes},
                   {"restarts", ds.restarts},
                   {"seconds", download_seconds}}},
                 {"load_average", {load[0], load[1], load[2]}}};
  if (o.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    std::printf("stoa bench scale: %s (%lld layers), int8 view %.3f GB\n", o.preset.c_str(),
                static_cast<long long>(config.num_layers),
                static_cast<double>(anchor.int8_bytes) / 1e9);
    for (const char* name : {"make_model", "anchor_load", "generate", "patch_apply"}) {
      const json& p = report["phases"][name];
      if (p.is_null()) {
        std::printf("  %-12s not run (--no-worker)\n", name);
        continue;
      }
      std::printf("  %-12s peak RSS %8.1f MB  %8.2f s\n", name,
                  p["peak_rss_bytes"].get<double>() / 1e6, p["seconds"].get<double>());
    }
    std::printf("  pulse: %.4f%% changed, patch %zu B, make %.2f s CPU, applied in %s s\n",
                100 * changed_fraction, patch_blob.size(),
                version.make_cpu_seconds + encode_seconds, apply_seconds.dump().c_str());
    std::printf("  download: %llu B blob, %llu B through the proxy, %llu cuts\n",
                static_cast<unsigned long long>(anchor.entry.bytes),
                static_cast<unsigned long long>(proxy.counters().bytes_to_client),
                static_cast<unsigned long long>(proxy.counters().cuts));
    std::printf("  load average %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  }
  return 0;
}

}  // namespace stoa::bench
