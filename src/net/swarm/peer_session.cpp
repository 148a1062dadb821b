// The worker's side of the swarm: one libtorrent session that fetches blobs from peers and the
// hub's web seed, keeps seeding what was used, and counts what it served. Totals up and down
// are libtorrent's per torrent (exact); which part of the download came from the hub's web
// seed is sampled from its connections every 250 ms and when a fetch ends (libtorrent keeps
// that per connection only), so the split can miss the last moments of a web-seed connection
// that closed between samples. An alert thread counts bad pieces and bans.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <libtorrent/alert_types.hpp>
#include <libtorrent/ip_filter.hpp>
#include <libtorrent/peer_info.hpp>
#include <libtorrent/session.hpp>
#include <libtorrent/settings_pack.hpp>
#include <libtorrent/torrent_handle.hpp>
#include <libtorrent/torrent_info.hpp>
#include <libtorrent/torrent_status.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "net/swarm/swarm.h"

namespace stoa::net::swarm {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
// A web seed that has been away this long is added again (the hub's Retry-After is 1 s).
constexpr auto kReseedAfter = std::chrono::milliseconds(1500);
constexpr auto kReannounceAfter = std::chrono::seconds(5);

namespace {

lt::settings_pack session_settings(const PeerSessionOptions& o) {
  lt::settings_pack s;
  s.set_str(lt::settings_pack::listen_interfaces, o.listen);
  s.set_str(lt::settings_pack::user_agent, "stoa");
  s.set_int(lt::settings_pack::alert_mask,
            static_cast<int>(lt::alert_category::error | lt::alert_category::peer |
                             lt::alert_category::status));
  // A private swarm: peers come from the hub's tracker, never from DHT or local discovery.
  s.set_bool(lt::settings_pack::enable_dht, false);
  s.set_bool(lt::settings_pack::enable_lsd, false);
  s.set_bool(lt::settings_pack::enable_upnp, o.nat_traversal);
  s.set_bool(lt::settings_pack::enable_natpmp, o.nat_traversal);
  s.set_bool(lt::settings_pack::allow_multiple_connections_per_ip, o.one_host);
  s.set_bool(lt::settings_pack::validate_https_trackers, o.validate_https);
  // libtorrent refuses trackers on loopback whose path is not a plain /announce (a guard for
  // desktop clients against torrents that probe local services); ours is the hub itself.
  s.set_bool(lt::settings_pack::ssrf_mitigation, !o.one_host);
  s.set_int(lt::settings_pack::upload_rate_limit, o.serve ? o.upload_kib_s * 1024 : 0);
  // Not serving: no upload slot is ever opened, so nothing is sent but requests.
  if (!o.serve) s.set_int(lt::settings_pack::unchoke_slots_limit, 0);
  s.set_int(lt::settings_pack::connections_limit, 200);
  // One piece per web-seed request: the hub's web seed decides piece by piece whether the swarm
  // should serve it instead (a 503 with Retry-After), and a many-piece request would be refused
  // whole for one piece.
  s.set_int(lt::settings_pack::urlseed_max_request_bytes, 16 << 10);
  if (!o.outgoing_interface.empty())
    s.set_str(lt::settings_pack::outgoing_interfaces, o.outgoing_interface);
  s.set_int(lt::settings_pack::stop_tracker_timeout, 2);
  return s;
}

// Every address in the global peer class: libtorrent's default puts peers on local networks in
// a class of their own without rate limits, which would let the upload cap leak on a LAN.
lt::ip_filter everyone_global() {
  lt::ip_filter filter;
  const std::uint32_t global = 1u << static_cast<std::uint32_t>(lt::session::global_peer_class_id);
  filter.add_rule(lt::make_address("0.0.0.0"), lt::make_address("255.255.255.255"), global);
  filter.add_rule(lt::make_address("::"),
                  lt::make_address("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), global);
  return filter;
}

}  // namespace

struct PeerSession::Impl {
  struct Held {
    lt::torrent_handle handle;
    std::string path;
    bool used = false;
    uint64_t order = 0;
  };
  // A web-seed connection's last total, folded into the base when it goes.
  struct Seen {
    uint64_t down = 0;
    bool live = false;
  };

  explicit Impl(const PeerSessionOptions& o) : options(o), session(session_settings(o)) {
    session.set_peer_class_filter(everyone_global());
    watcher = std::thread([this] { watch(); });
  }
  ~Impl() {
    stop = true;
    watcher.join();
  }

  void fold(Seen& s) {
    from_hub_base += s.down;
    s = Seen{};
  }

  // Alerts and per-connection totals, every 250 ms.
  void watch() {
    while (!stop) {
      std::vector<lt::alert*> alerts;
      session.wait_for_alert(std::chrono::milliseconds(250));
      session.pop_alerts(&alerts);
      std::lock_guard lock(mutex);
      for (lt::alert* a : alerts) {
        if (auto* failed = lt::alert_cast<lt::hash_failed_alert>(a)) {
          ++hash_failures;
          log_warn("swarm", "piece ", static_cast<int>(failed->piece_index),
                   " failed its hash; fetched again");
        } else if (auto* ban = lt::alert_cast<lt::peer_ban_alert>(a)) {
          // One ban alert per connection (TCP and uTP, each failed piece): count addresses.
          if (!banned.insert(ban->endpoint.address().to_string()).second) continue;
          log_warn("swarm", "peer ", ban->endpoint.address().to_string(), ":", ban->endpoint.port(),
                   " banned: it sent data that failed the hash");
        } else if (a->category() & lt::alert_category::error) {
          log_info("swarm", a->message());
        }
      }
      sample_locked();
    }
  }

  void sample_locked() {
    for (auto& [key, s] : seen) s.live = false;
    serving = connected = 0;
    for (const Held& h : held) {
      std::vector<lt::peer_info> peers;
      h.handle.get_peer_info(peers);
      for (const lt::peer_info& p : peers) {
        if (p.connection_type & lt::peer_info::web_seed) {
          Seen& s =
              seen[h.path + "|" + p.ip.address().to_string() + ":" + std::to_string(p.ip.port())];
          const auto down = static_cast<uint64_t>(p.total_download);
          if (down < s.down) fold(s);  // a new connection to the same web seed
          s.down = down;
          s.live = true;
          continue;
        }
        ++connected;
        if (!(p.flags & lt::peer_info::choked) && (p.flags & lt::peer_info::remote_interested))
          ++serving;
      }
    }
    for (auto it = seen.begin(); it != seen.end();) {
      if (it->second.live) {
        ++it;
      } else {
        fold(it->second);
        it = seen.erase(it);
      }
    }
  }

  // Whether the torrent at `path` has a web-seed connection now (as of the last sample).
  bool web_seed_live(const std::string& path) const {
    const std::string prefix = path + "|";
    for (auto it = seen.lower_bound(prefix); it != seen.end() && it->first.rfind(prefix, 0) == 0;
         ++it)
      if (it->second.live) return true;
    return false;
  }

  void remove_locked(std::vector<Held>::iterator it, bool delete_file) {
    sample_locked();
    const lt::torrent_status st = it->handle.status();
    uploaded_base += static_cast<uint64_t>(st.total_payload_upload);
    downloaded_base += static_cast<uint64_t>(st.total_payload_download);
    session.remove_torrent(it->handle,
                           delete_file ? lt::session::delete_files : lt::remove_flags_t{});
    held.erase(it);
  }

  PeerSessionOptions options;
  lt::session session;
  mutable std::mutex mutex;
  std::vector<Held> held;
  uint64_t next_order = 0;
  std::map<std::string, Seen> seen;
  uint64_t uploaded_base = 0, downloaded_base = 0, from_hub_base = 0;  // of what has gone
  int serving = 0, connected = 0, hash_failures = 0;
  std::set<std::string> banned;  // addresses (a handful: each took a bad piece to earn it)
  std::atomic<bool> stop{false};
  std::thread watcher;
};

PeerSession::PeerSession(const PeerSessionOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}

PeerSession::~PeerSession() = default;

std::string PeerSession::fetch(const FetchRequest& r) {
  lt::error_code ec;
  auto info = std::make_shared<lt::torrent_info>(
      lt::span<char const>(r.torrent.data(), static_cast<long>(r.torrent.size())), ec,
      lt::from_span);
  STOA_CHECK(!ec, ErrorKind::kBadFormat, "swarm: the hub's torrent does not parse: ", ec.message());
  // One file, and a pad file after it where the blob is not a whole number of pieces.
  std::optional<lt::file_index_t> blob_file;
  for (const lt::file_index_t f : info->files().file_range()) {
    if (info->files().pad_file_at(f)) continue;
    STOA_CHECK(!blob_file, ErrorKind::kBadFormat,
               "swarm: a blob's torrent holds more than one file");
    blob_file = f;
  }
  STOA_CHECK(blob_file, ErrorKind::kBadFormat, "swarm: a blob's torrent holds no file");
  const std::string path =
      (fs::path(r.save_dir) / std::string(info->files().file_path(*blob_file))).string();
  STOA_CHECK(fs::path(path).parent_path() == fs::path(r.save_dir), ErrorKind::kBadFormat,
             "swarm: the torrent's file name leaves the save directory");
  lt::torrent_handle handle;
  {
    std::lock_guard lock(impl_->mutex);
    for (const Impl::Held& h : impl_->held)
      if (h.path == path) handle = h.handle;
    if (!handle.is_valid()) {
      fs::create_directories(r.save_dir);
      if (!r.web_seed_url.empty()) info->add_url_seed(r.web_seed_url);
      lt::add_torrent_params params;
      params.ti = info;
      params.save_path = r.save_dir;
      if (!r.tracker_url.empty()) params.trackers.push_back(r.tracker_url);
      params.flags &= ~(lt::torrent_flags::auto_managed | lt::torrent_flags::paused);
      params.flags |= lt::torrent_flags::duplicate_is_error;
      handle = impl_->session.add_torrent(std::move(params), ec);
      STOA_CHECK(!ec, ErrorKind::kIo, "swarm: cannot add the torrent of ", path, ": ",
                 ec.message());
      impl_->held.push_back({handle, path, false, impl_->next_order++});
    }
  }
  auto drop = [&] {
    std::lock_guard lock(impl_->mutex);
    auto it = std::find_if(impl_->held.begin(), impl_->held.end(),
                           [&](const Impl::Held& h) { return h.path == path; });
    if (it != impl_->held.end()) impl_->remove_locked(it, true);
  };
  int64_t last_done = -1;
  auto last_gain = Clock::now();
  auto last_report = Clock::now() - r.progress_interval;
  auto last_reseed = Clock::now(), last_web_seed = Clock::now(), last_reannounce = Clock::now();
  for (;;) {
    const lt::torrent_status st = handle.status();
    if (st.errc) {
      drop();
      fail(ErrorKind::kIo, "swarm: ", path, ": ", st.errc.message());
    }
    const bool done = st.is_finished && st.total_wanted_done == st.total_wanted &&
                      st.state != lt::torrent_status::checking_files;
    const auto now = Clock::now();
    {
      std::lock_guard lock(impl_->mutex);
      impl_->sample_locked();  // the web seed's share, before its connection can close
    }
    if (st.total_wanted_done > last_done) {
      last_done = st.total_wanted_done;
      last_gain = now;
    }
    if (r.on_progress && (done || now - last_report >= r.progress_interval)) {
      last_report = now;
      FetchProgress p;
      p.bytes = static_cast<uint64_t>(st.total_wanted_done);
      p.total = static_cast<uint64_t>(st.total_wanted);
      p.bytes_per_s = st.download_payload_rate;
      p.eta_s = p.bytes_per_s > 0 ? static_cast<double>(p.total - p.bytes) / p.bytes_per_s : -1;
      p.peers = st.num_peers;
      r.on_progress(p);
    }
    if (done) {
      std::lock_guard lock(impl_->mutex);
      impl_->sample_locked();
      return path;
    }
    // libtorrent drops a web seed that answered 503 (a piece the hub wants the swarm to spread)
    // and would wait its own retry time: the hub's uplink would idle. It is added back at once,
    // so the hub keeps sending the pieces that have left it least.
    bool web_seed_connected;
    {
      std::lock_guard lock(impl_->mutex);
      web_seed_connected = impl_->web_seed_live(path);
    }
    if (web_seed_connected) last_web_seed = now;
    if (!r.web_seed_url.empty() && now - last_web_seed > kReseedAfter &&
        now - last_reseed > kReseedAfter) {
      last_reseed = now;
      handle.remove_url_seed(r.web_seed_url);
      handle.add_url_seed(r.web_seed_url);
    }
    // A swarm that stopped delivering may have lost its peers: ask the tracker for the others
    // now rather than at the next interval.
    if (now - last_gain > kReannounceAfter && now - last_reannounce > kReannounceAfter) {
      last_reannounce = now;
      handle.force_reannounce(0, -1, lt::torrent_handle::ignore_min_interval);
    }
    if (now - last_gain > r.stall_timeout) {
      drop();
      fail(ErrorKind::kNetwork, "swarm: no verified byte of ", fs::path(path).filename().string(),
           " for ", std::chrono::duration_cast<std::chrono::seconds>(r.stall_timeout).count(),
           " s from ", st.num_peers, " peers and the hub");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void PeerSession::release(const std::string& path) {
  std::lock_guard lock(impl_->mutex);
  auto& held = impl_->held;
  auto it =
      std::find_if(held.begin(), held.end(), [&](const Impl::Held& h) { return h.path == path; });
  if (it == held.end()) return;
  if (!impl_->options.serve) return impl_->remove_locked(it, true);
  it->used = true;
  it->order = impl_->next_order++;
  // Keep the newest keep_blobs used blobs; the older ones leave the swarm and the disk.
  for (;;) {
    const auto used =
        std::count_if(held.begin(), held.end(), [](const Impl::Held& h) { return h.used; });
    if (used <= std::max(0, impl_->options.keep_blobs)) break;
    auto oldest =
        std::min_element(held.begin(), held.end(), [](const Impl::Held& a, const Impl::Held& b) {
          if (a.used != b.used) return a.used;  // used ones first
          return a.order < b.order;
        });
    impl_->remove_locked(oldest, true);
  }
}

SwarmStats PeerSession::stats() const {
  std::lock_guard lock(impl_->mutex);
  SwarmStats s;
  s.uploaded_bytes = impl_->uploaded_base;
  uint64_t downloaded = impl_->downloaded_base;
  for (const Impl::Held& h : impl_->held) {
    const lt::torrent_status st = h.handle.status();
    s.uploaded_bytes += static_cast<uint64_t>(st.total_payload_upload);
    downloaded += static_cast<uint64_t>(st.total_payload_download);
  }
  s.from_hub_bytes = impl_->from_hub_base;
  for (const auto& [key, seen] : impl_->seen) s.from_hub_bytes += seen.down;
  s.from_hub_bytes = std::min(s.from_hub_bytes, downloaded);
  s.from_peers_bytes = downloaded - s.from_hub_bytes;
  s.serving_peers = impl_->serving;
  s.connected_peers = impl_->connected;
  s.seeding = static_cast<int>(std::count_if(impl_->held.begin(), impl_->held.end(),
                                             [](const Impl::Held& h) { return h.used; }));
  s.banned_peers = static_cast<int>(impl_->banned.size());
  s.hash_failures = impl_->hash_failures;
  s.listen_port = impl_->session.listen_port();
  s.serve = impl_->options.serve;
  s.upload_kib_s = impl_->options.serve ? impl_->options.upload_kib_s : 0;
  return s;
}

}  // namespace stoa::net::swarm
