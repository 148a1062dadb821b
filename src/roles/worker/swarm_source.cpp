#include "roles/worker/swarm_source.h"

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "net/hub_client.h"
#include "roles/worker/uplink_probe.h"
#include "roles/worker/worker.h"

namespace stoa::worker {
namespace fs = std::filesystem;

SwarmBlobSource::SwarmBlobSource(net::HubClient& hub, HubBlobSource& hub_source,
                                 SwarmSourceOptions options)
    : hub_(hub), hub_source_(hub_source), options_(std::move(options)), session_(options_.session) {
  fs::create_directories(options_.dir);
}

net::VersionInfo SwarmBlobSource::version(std::optional<uint64_t> after,
                                          std::chrono::seconds timeout) {
  net::VersionInfo info = hub_source_.version(after, timeout);
  std::lock_guard lock(mutex_);
  if (small_.size() >= 256) small_.clear();  // bounded: only the route in hand matters
  for (const net::BlobRef& b : info.blobs)
    if (b.bytes < options_.direct_below_bytes) small_.insert(b.hash);
  return info;
}

std::vector<uint8_t> SwarmBlobSource::blob(const std::string& hash_hex) {
  return hub_source_.blob(hash_hex);
}

bool SwarmBlobSource::ensure_key() {
  {
    std::lock_guard lock(mutex_);
    if (hub_has_swarm_) return *hub_has_swarm_;
  }
  // A worker that serves nobody says so: the hub then lists it to no other worker.
  const net::HttpResponse r = hub_.http().post_json(
      "/v1/swarm/key", nlohmann::json{{"serve", options_.session.serve}}.dump(), true);
  std::lock_guard lock(mutex_);
  if (r.status == 404) {
    log_info("swarm", "the hub serves no swarm: blobs come from the hub alone");
    hub_has_swarm_ = false;
    return false;
  }
  STOA_CHECK(r.status == 200, ErrorKind::kNetwork, "swarm key: HTTP ", r.status, ": ",
             r.body.substr(0, 200));
  const auto j = nlohmann::json::parse(r.body);
  const std::string& base = hub_.http().base_url();
  announce_url_ = base + j.at("announce").get<std::string>();
  seed_url_ = base + j.at("seed").get<std::string>();
  hub_has_swarm_ = true;
  return true;
}

std::optional<std::string> SwarmBlobSource::blob_file(const std::string& hash_hex) {
  bool again, small;
  {
    std::lock_guard lock(mutex_);
    again = from_swarm_.count(hash_hex) != 0;
    small = small_.count(hash_hex) != 0;
  }
  if (!again && !small) {
    try {
      if (ensure_key()) {
        const net::HttpResponse t = hub_.http().get("/v1/swarm/torrents/" + hash_hex);
        STOA_CHECK(t.status == 200, ErrorKind::kNetwork, "torrent of blob ", hash_hex.substr(0, 12),
                   ": HTTP ", t.status, ": ", t.body.substr(0, 200));
        net::swarm::FetchRequest request;
        request.torrent.assign(t.body.begin(), t.body.end());
        request.tracker_url = announce_url_;
        request.web_seed_url = seed_url_ + hash_hex;
        request.save_dir = options_.dir;
        request.stall_timeout = options_.stall_timeout;
        request.progress_interval = std::chrono::milliseconds(5000);
        request.on_progress = [&](const net::swarm::FetchProgress& p) {
          {
            std::lock_guard lock(mutex_);
            progress_ = net::BlobDownload{hash_hex, p.bytes, p.total, p.bytes_per_s, p.eta_s};
          }
          log_info("swarm", "blob ", hash_hex.substr(0, 12), ": ", p.bytes >> 20, " of ",
                   p.total >> 20, " MiB, ", static_cast<int64_t>(p.bytes_per_s / 1024), " KiB/s, ",
                   p.peers, " peers");
        };
        const std::string path = session_.fetch(request);
        std::lock_guard lock(mutex_);
        progress_.reset();
        // Bounded: a long run names many blobs; only a refetch right after use matters.
        if (from_swarm_.size() >= 256) from_swarm_.clear();
        from_swarm_.insert(hash_hex);
        return path;
      }
    } catch (const Error& e) {
      std::lock_guard lock(mutex_);
      progress_.reset();
      ++fallbacks_;
      log_warn("swarm", "blob ", hash_hex.substr(0, 12), ": ", e.what(),
               "; fetching it from the hub");
    }
  }
  return hub_source_.blob_file(hash_hex);
}

void SwarmBlobSource::discard(const std::string& hash_hex) {
  const std::string swarm_path = (fs::path(options_.dir) / hash_hex).string();
  bool ours;
  {
    std::lock_guard lock(mutex_);
    ours = from_swarm_.count(hash_hex) != 0;
  }
  // A blob from the swarm stays and is served to others (within keep_blobs); the hub's spool
  // file goes as before.
  if (ours) session_.release(swarm_path);
  hub_source_.discard(hash_hex);
}

std::optional<net::BlobDownload> SwarmBlobSource::download_progress() const {
  {
    std::lock_guard lock(mutex_);
    if (progress_) return progress_;
  }
  return hub_source_.download_progress();
}

net::swarm::SwarmStats SwarmBlobSource::stats() const {
  return session_.stats();
}

namespace {

// What this worker serves at most (KiB/s): the cap asked for, else a share of the upload rate
// measured against the hub, else (the hub has no probe, or it failed) 1024 KiB/s.
int upload_cap(const WorkerOptions& o, net::HubClient& hub) {
  if (o.upload_kib_s) return *o.upload_kib_s;
  constexpr int kUnmeasuredCap = 1024;
  try {
    const UplinkMeasure m = measure_uplink(hub.http());
    const int cap = upload_cap_kib_s(m, o.upload_share);
    log_info("swarm", "upload to the hub measured at ", std::lround(m.kib_s), " KiB/s (",
             m.bytes >> 10, " KiB in ", std::lround(m.seconds * 1000),
             " ms): serving other workers at most ", cap, " KiB/s (",
             std::lround(100 * o.upload_share), " %; --upload sets it)");
    return cap;
  } catch (const std::exception& e) {
    log_warn("swarm", "could not measure the upload rate (", e.what(),
             "): serving other workers at most ", kUnmeasuredCap, " KiB/s");
    return kUnmeasuredCap;
  }
}

}  // namespace

// The swarm as the options ask (WorkerOptions::swarm), or null: off, auto with a hub on
// loopback, or a build without a swarm engine.
std::unique_ptr<SwarmBlobSource> make_swarm_source(const WorkerOptions& o, net::HubClient& hub,
                                                   HubBlobSource& hub_source,
                                                   const std::string& state_dir) {
  const std::string& url = hub.http().base_url();
  const bool loopback = url.find("://127.") != std::string::npos ||
                        url.find("://localhost") != std::string::npos ||
                        url.find("://[::1]") != std::string::npos;
  if (o.swarm == WorkerOptions::Swarm::kOff || (o.swarm == WorkerOptions::Swarm::kAuto && loopback))
    return nullptr;
  if (!net::swarm::available()) {
    log_warn("swarm", "this build has no swarm engine: blobs come from the hub alone");
    return nullptr;
  }
  SwarmSourceOptions so;
  so.dir = (fs::path(state_dir) / "swarm").string();
  so.session.serve = o.serve;
  so.session.upload_kib_s = o.serve ? upload_cap(o, hub) : 0;
  if (!o.swarm_listen.empty())
    so.session.listen = o.swarm_listen;
  else
    so.session.listen = "0.0.0.0:0,[::]:0";
  so.session.one_host = loopback;  // every worker of a loopback hub shares one address
  so.session.nat_traversal = !loopback;
  // The hub's certificate is pinned by our own client; libtorrent's connections carry only the
  // swarm key, which opens nothing but blobs and announces.
  so.session.validate_https = false;
  return std::make_unique<SwarmBlobSource>(hub, hub_source, so);
}

uint64_t SwarmBlobSource::fallbacks() const {
  std::lock_guard lock(mutex_);
  return fallbacks_;
}

}  // namespace stoa::worker
