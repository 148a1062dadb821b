#include "roles/worker/weight_sync.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "net/hub_client.h"
#include "net/spool_download.h"
#include "pulse/anchor_stream.h"
#include "pulse/format.h"
#include "pulse/model_view.h"
#include "pulse/patch.h"
#include "roles/worker/weight_sync_engine.h"

namespace stoa::worker {
namespace fs = std::filesystem;

HubBlobSource::HubBlobSource(net::HubClient& hub, std::string spool_dir)
    : hub_(hub), spool_dir_(std::move(spool_dir)) {
  if (!spool_dir_.empty()) fs::create_directories(spool_dir_);
}

net::VersionInfo HubBlobSource::version(std::optional<uint64_t> after,
                                        std::chrono::seconds timeout) {
  return hub_.version(after, timeout);
}

std::vector<uint8_t> HubBlobSource::blob(const std::string& hash_hex) {
  return hub_.blob(hash_hex);
}

std::string HubBlobSource::spool_path(const std::string& hash_hex) const {
  return (fs::path(spool_dir_) / (hash_hex + ".blob")).string();
}

std::optional<std::string> HubBlobSource::blob_file(const std::string& hash_hex) {
  if (spool_dir_.empty()) return std::nullopt;
  Hash128 parsed;
  STOA_CHECK(Hash128::parse(hash_hex, &parsed), ErrorKind::kInvalidArgument, "blob hash '",
             hash_hex, "' is not 32 hex digits");
  const std::string path = spool_path(hash_hex);
  net::DownloadOptions options;
  options.read_timeout = std::chrono::milliseconds(120000);
  options.progress_interval = std::chrono::milliseconds(5000);
  options.on_progress = [&](const net::DownloadProgress& p) {
    {
      std::lock_guard lock(progress_mutex_);
      progress_ = net::BlobDownload{hash_hex, p.bytes, p.total, p.bytes_per_s, p.eta_s};
    }
    log_info("sync", "blob ", hash_hex.substr(0, 12), ": ", p.bytes >> 20, " of ", p.total >> 20,
             " MiB, ", static_cast<int64_t>(p.bytes_per_s / 1024), " KiB/s, ETA ",
             p.eta_s < 0 ? std::string("?") : cat(static_cast<int64_t>(p.eta_s), " s"));
  };
  struct ClearProgress {
    HubBlobSource& s;
    ~ClearProgress() {
      std::lock_guard lock(s.progress_mutex_);
      s.progress_.reset();
    }
  } clear{*this};
  const net::DownloadStats stats =
      net::download_to_spool(hub_.http(), "/v1/blobs/" + hash_hex, path, options);
  if (stats.resumed_from > 0 || stats.restarts > 0 || stats.requests > 1)
    log_info("sync", "blob ", hash_hex.substr(0, 12), ": ", stats.bytes, " bytes (",
             stats.resumed_from, " from the spool, ", stats.requests, " requests, ", stats.restarts,
             " restarts)");
  return path;
}

void HubBlobSource::discard(const std::string& hash_hex) {
  if (!spool_dir_.empty()) net::remove_spool(spool_path(hash_hex));
}

std::optional<net::BlobDownload> HubBlobSource::download_progress() const {
  std::lock_guard lock(progress_mutex_);
  return progress_;
}

WeightSync::WeightSync(BlobSource& source, std::optional<Hash128> expected_config_hash)
    : WeightSync(source, expected_config_hash, std::make_unique<StateStore>()) {}

WeightSync::WeightSync(BlobSource& source, const ModelConfig& config)
    : WeightSync(source, pulse::config_hash(config), std::make_unique<EngineStore>(config)) {}

WeightSync::WeightSync(BlobSource& source, const ModelConfig& config, LayerSpan span)
    : WeightSync(source, pulse::config_hash(config), std::make_unique<EngineStore>(config, span)) {}

WeightSync::WeightSync(BlobSource& source, std::optional<Hash128> expected_config_hash,
                       std::unique_ptr<ResidentStore> store)
    : source_(source), store_(std::move(store)), expected_config_(expected_config_hash) {}

std::optional<uint64_t> WeightSync::version() const {
  if (!store_->has_state()) return std::nullopt;
  return store_->version();
}

std::optional<uint64_t> WeightSync::latest_seen() const {
  std::lock_guard lock(mutex_);
  return latest_seen_;
}

uint64_t WeightSync::max_staleness() const {
  std::lock_guard lock(mutex_);
  return max_staleness_;
}

SyncCounters WeightSync::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

std::string WeightSync::last_error() const {
  std::lock_guard lock(mutex_);
  return last_error_;
}

std::optional<net::BlobRef> WeightSync::fetching() const {
  std::lock_guard lock(mutex_);
  return fetching_;
}

pulse::Int8State WeightSync::snapshot() const {
  return store_->snapshot();
}

std::optional<WeightUpdate> WeightSync::take_update(UpdateForm form) {
  return store_->take_update(form);
}

static std::vector<uint8_t> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STOA_CHECK(in.good(), ErrorKind::kIo, "cannot open ", path);
  std::vector<uint8_t> bytes(static_cast<size_t>(fs::file_size(path)));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  STOA_CHECK(in.gcount() == static_cast<std::streamsize>(bytes.size()), ErrorKind::kIo,
             "short read from ", path);
  return bytes;
}

WeightSync::Fetched WeightSync::fetch_verified(const net::BlobRef& ref, bool allow_refetch) {
  Hash128 want;
  STOA_CHECK(Hash128::parse(ref.hash, &want), ErrorKind::kBadFormat, "blob ", ref.kind, " ",
             ref.from_version, "->", ref.to_version, ": bad hash '", ref.hash, "'");
  {
    std::lock_guard lock(mutex_);
    fetching_ = ref;
  }
  struct ClearFetching {
    WeightSync& sync;
    ~ClearFetching() {
      std::lock_guard lock(sync.mutex_);
      sync.fetching_.reset();
    }
  } clear{*this};
  for (int attempt = 0;; ++attempt) {
    try {
      Fetched fetched;
      const std::optional<std::string> file = source_.blob_file(ref.hash);
      if (file) {
        const uint64_t size = fs::file_size(*file);
        {
          std::lock_guard lock(mutex_);
          counters_.bytes_fetched += size;
        }
        // An anchor stays on disk: the streaming decoder checks its content address as it reads.
        // When it will be written over the held weights, the whole file is proven first, so a
        // transfer error is refetched instead of costing the weights.
        if (ref.kind == "anchor") {
          if (store_->anchor_overwrites_state()) {
            uint64_t bytes = 0;
            const Hash128 got = pulse::hash_blob_file(*file, &bytes);
            if (!(got == want)) {
              source_.discard(ref.hash);
              fail(ErrorKind::kIntegrity, "blob ", ref.hash, " (anchor ", ref.to_version,
                   "): ", bytes, " bytes received hashing to ", got.hex(),
                   ", not to the requested name");
            }
          }
          fetched.path = *file;
          return fetched;
        }
        fetched.bytes = read_whole_file(*file);  // a patch is small
        source_.discard(ref.hash);
      } else {
        fetched.bytes = source_.blob(ref.hash);
        std::lock_guard lock(mutex_);
        counters_.bytes_fetched += fetched.bytes.size();
      }
      std::vector<uint8_t>& bytes = fetched.bytes;
      // The content address is the first line of defence: a truncated or bit-flipped transfer
      // never hashes to the name it was asked for.
      const Hash128 got = hash_bytes(bytes.data(), bytes.size());
      STOA_CHECK(got == want, ErrorKind::kIntegrity, "blob ", ref.hash, " (", ref.kind, " ",
                 ref.from_version, "->", ref.to_version, "): ", bytes.size(),
                 " bytes received hashing to ", got.hex(), ", not to the requested name");
      return fetched;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIntegrity || !allow_refetch || attempt >= 1) throw;
      std::lock_guard lock(mutex_);
      ++counters_.blobs_refused;
      ++counters_.refetches;
      last_error_ = e.what();
      log_warn("sync", e.what(), "; fetching it again");
    }
  }
}

namespace {
// Thrown by the anchor sink when the anchor holds exactly the state already held.
struct SameState {};
}  // namespace

// An anchor's tensors on their way into the store, after the envelope checks the route and the
// worker's model impose (kind, versions, config hash, fingerprint) — made before the first
// tensor is read, so a wrong anchor never touches the held weights.
class AnchorToStore final : public pulse::AnchorSink {
 public:
  AnchorToStore(WeightSync& sync, const net::BlobRef& ref) : sync_(sync), ref_(ref) {}
  void begin(const pulse::BlobHeader& header, const Hash128& config_hash) override {
    const std::string what = cat("blob ", ref_.hash);
    ResidentStore& store = *sync_.store_;
    STOA_CHECK(header.kind == pulse::BlobKind::kAnchor, ErrorKind::kIntegrity, what,
               ": the route promised an anchor, the envelope holds a ",
               pulse::blob_kind_name(header.kind));
    STOA_CHECK(header.from_version == ref_.from_version && header.to_version == ref_.to_version &&
                   ref_.from_version == ref_.to_version,
               ErrorKind::kIntegrity, what, ": anchor is at version ", header.to_version,
               ", the route promised ", ref_.from_version, "->", ref_.to_version);
    std::optional<Hash128> expected;
    {
      std::lock_guard lock(sync_.mutex_);
      expected = sync_.expected_config_;
    }
    if (expected)
      STOA_CHECK(config_hash == *expected, ErrorKind::kIntegrity, what,
                 ": anchor is for another model (config hash ", config_hash.hex(),
                 ", this worker runs ", expected->hex(), ")");
    if (store.has_state()) {
      STOA_CHECK(header.fingerprint == store.fingerprint(), ErrorKind::kIntegrity, what,
                 ": anchor fingerprint differs from the model this worker holds");
      // The same state again (a fallback to the anchor already held): nothing changes, so the
      // engine must not reload every tensor.
      if (header.to_version == store.version() && header.state_hash == store.state_hash())
        throw SameState{};
    }
    config_hash_ = config_hash;
    store.begin_anchor(header, config_hash);
    began_ = true;
  }
  void tensor(const std::string& name, pulse::StateTensor t, const Hash128& hash) override {
    sync_.store_->anchor_tensor(name, std::move(t), hash);
  }
  bool began() const { return began_; }
  const Hash128& config_hash() const { return config_hash_; }

 private:
  WeightSync& sync_;
  const net::BlobRef& ref_;
  bool began_ = false;
  Hash128 config_hash_;
};

void WeightSync::apply_anchor(const net::BlobRef& ref, const Fetched& blob) {
  AnchorToStore sink(*this, ref);
  try {
    if (!blob.path.empty()) {
      // Streamed from its spool file: the content address, every tensor hash, the state hash
      // and the fingerprint are checked as it is read.
      Hash128 want;
      Hash128::parse(ref.hash, &want);  // checked by fetch_verified
      pulse::stream_anchor_file(blob.path, &want, sink);
    } else {
      const pulse::BlobHeader header = pulse::read_header(blob.bytes, cat("blob ", ref.hash));
      // decode_anchor checks every tensor hash, the state hash and the fingerprint field.
      pulse::Int8State fresh;
      if (header.kind == pulse::BlobKind::kAnchor) fresh = pulse::decode_anchor(blob.bytes);
      sink.begin(header, fresh.config_hash());
      for (const auto& [name, t] : fresh.tensors()) sink.tensor(name, t, fresh.tensor_hash(name));
    }
    store_->commit_anchor();
  } catch (const SameState&) {
    if (!blob.path.empty()) source_.discard(ref.hash);
    std::lock_guard lock(mutex_);
    ++counters_.blobs_applied;
    return;
  } catch (...) {
    if (sink.began()) store_->abort_anchor();
    // The file goes either way (a refetch restarts).
    if (!blob.path.empty()) source_.discard(ref.hash);
    throw;
  }
  if (!blob.path.empty()) source_.discard(ref.hash);
  std::lock_guard lock(mutex_);
  if (!expected_config_) expected_config_ = sink.config_hash();
  ++counters_.blobs_applied;
}

void WeightSync::apply_blob(const net::BlobRef& ref, const Fetched& blob) {
  const std::string what = cat("blob ", ref.hash);
  if (ref.kind == "anchor") return apply_anchor(ref, blob);
  const std::vector<uint8_t>& bytes = blob.bytes;
  pulse::BlobHeader header = pulse::read_header(bytes, what);
  STOA_CHECK(header.from_version == ref.from_version && header.to_version == ref.to_version,
             ErrorKind::kIntegrity, what, ": envelope says versions ", header.from_version, "->",
             header.to_version, ", the route promised ", ref.from_version, "->", ref.to_version);
  STOA_CHECK(ref.kind == "patch" && header.kind == pulse::BlobKind::kPatch, ErrorKind::kIntegrity,
             what, ": route kind '", ref.kind, "' and envelope kind ",
             pulse::blob_kind_name(header.kind), " disagree");
  STOA_CHECK(store_->has_state(), ErrorKind::kInvalidArgument, what,
             ": a patch route needs a state to start from");
  // The limits bound what a hostile size field can make us allocate.
  pulse::Patch patch = pulse::decode_patch(bytes, store_->patch_limits());
  store_->apply_patch(std::move(patch));  // all or nothing; checks fingerprint and hashes
  std::lock_guard lock(mutex_);
  ++counters_.blobs_applied;
}

void WeightSync::apply_route(const std::vector<net::BlobRef>& route, bool allow_refetch) {
  // Every blob is fetched and proven by its content address before the first is applied: an
  // anchor written over the engine's weights cannot be undone, so a route that would break on
  // a bad transfer breaks before it touches them. (Patches are small; anchors stay on disk.)
  std::vector<Fetched> blobs;
  blobs.reserve(route.size());
  for (const net::BlobRef& ref : route) blobs.push_back(fetch_verified(ref, allow_refetch));
  for (size_t i = 0; i < route.size(); ++i) {
    const net::BlobRef& ref = route[i];
    try {
      apply_blob(ref, blobs[i]);
    } catch (const Error& e) {
      if (!allow_refetch) throw;
      // A blob that hashed right but would not apply was sent wrong by the hub (or our state is
      // off): one more fetch, then give up on the route.
      {
        std::lock_guard lock(mutex_);
        ++counters_.blobs_refused;
        ++counters_.refetches;
        last_error_ = e.what();
      }
      log_warn("sync", e.what(), "; fetching it again");
      apply_blob(ref, fetch_verified(ref, false));
    }
    blobs[i] = Fetched{};
  }
}

bool WeightSync::step(std::chrono::seconds timeout) {
  const std::optional<uint64_t> before = version();
  net::VersionInfo info = source_.version(before, timeout);
  {
    std::lock_guard lock(mutex_);
    max_staleness_ = info.max_staleness;
    if (info.version) latest_seen_ = info.version;
  }
  if (!info.version || (before && *before >= *info.version)) return false;

  auto check_final = [&](const net::VersionInfo& target) {
    const std::optional<uint64_t> held = version();
    STOA_CHECK(held && *held == *target.version, ErrorKind::kIntegrity,
               "sync: the route ended at version ", held.value_or(0), ", not the announced ",
               *target.version);
    if (!target.state_hash.empty()) {
      const Hash128 hash = store_->state_hash();
      STOA_CHECK(hash.hex() == target.state_hash, ErrorKind::kIntegrity,
                 "sync: state hash at version ", *target.version, " is ", hash.hex(),
                 ", the hub announced ", target.state_hash);
    }
  };
  try {
    apply_route(info.blobs, true);
    check_final(info);
    return true;
  } catch (const Error& e) {
    {
      std::lock_guard lock(mutex_);
      ++counters_.blobs_refused;
      last_error_ = e.what();
    }
    log_warn("sync", "route to version ", *info.version, " refused: ", e.what(),
             "; catching up from an anchor");
  }
  // The fallback: a cold plan starts with an anchor. Its blobs are all proven before the anchor
  // replaces the held state (apply_route), so a corrupt transfer leaves the state where it was;
  // one that fails after its anchor loaded leaves the last version it verified.
  try {
    {
      std::lock_guard lock(mutex_);
      ++counters_.anchor_fallbacks;
    }
    net::VersionInfo cold = source_.version(std::nullopt, std::chrono::seconds{0});
    STOA_CHECK(cold.version && !cold.blobs.empty() && cold.blobs.front().kind == "anchor",
               ErrorKind::kNetwork, "sync: the hub's cold route does not start with an anchor");
    apply_route(cold.blobs, false);
    check_final(cold);
    std::lock_guard lock(mutex_);
    latest_seen_ = cold.version;
    return !before || version() != before;
  } catch (const Error& e) {
    const std::optional<uint64_t> held = version();
    {
      std::lock_guard lock(mutex_);
      ++counters_.failed_syncs;
      last_error_ = e.what();
    }
    log_error("sync", "anchor fallback failed: ", e.what(), "; keeping version ",
              held ? std::to_string(*held) : std::string("none"));
    return false;
  }
}

}  // namespace stoa::worker
