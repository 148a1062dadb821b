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
#include "pulse/patch.h"

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
    : source_(source), expected_config_(expected_config_hash) {}

std::optional<uint64_t> WeightSync::version() const {
  std::lock_guard lock(mutex_);
  if (!have_state_) return std::nullopt;
  return state_.version();
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

pulse::Int8State WeightSync::snapshot() const {
  std::lock_guard lock(mutex_);
  return state_;
}

std::optional<WeightUpdate> WeightSync::take_update(UpdateForm form) {
  std::lock_guard lock(mutex_);
  if (!have_state_ || !update_pending_) return std::nullopt;
  WeightUpdate update;
  update.version = state_.version();
  update.state_hash = state_.state_hash();
  update.full = full_pending_;
  const bool as_patches = form == UpdateForm::kPatches && !full_pending_ && patches_held_;
  if (as_patches) {
    update.patches = std::move(patches_);
  } else if (full_pending_) {
    for (const auto& [name, tensor] : state_.tensors()) update.tensors.emplace_back(name, tensor);
  } else {
    for (const std::string& name : touched_) update.tensors.emplace_back(name, state_.at(name));
  }
  full_pending_ = false;
  update_pending_ = false;
  touched_.clear();
  patches_.clear();
  patches_held_ = true;
  patch_values_ = 0;
  return update;
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
        if (ref.kind == "anchor") {
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

void WeightSync::apply_blob(const net::BlobRef& ref, const Fetched& blob) {
  const std::string what = cat("blob ", ref.hash);
  if (!blob.path.empty()) {
    // Streamed from its spool file: the content address, every tensor hash, the state hash and
    // the fingerprint are checked as it is read; the file goes either way (a refetch restarts).
    pulse::Int8State fresh;
    try {
      Hash128 want;
      Hash128::parse(ref.hash, &want);  // checked by fetch_verified
      fresh = pulse::decode_anchor_file(blob.path, &want);
    } catch (...) {
      source_.discard(ref.hash);
      throw;
    }
    source_.discard(ref.hash);
    STOA_CHECK(fresh.version() == ref.to_version && ref.from_version == ref.to_version,
               ErrorKind::kIntegrity, what, ": anchor is at version ", fresh.version(),
               ", the route promised ", ref.from_version, "->", ref.to_version);
    return apply_anchor(ref, std::move(fresh));
  }
  const std::vector<uint8_t>& bytes = blob.bytes;
  pulse::BlobHeader header = pulse::read_header(bytes, what);
  STOA_CHECK(header.from_version == ref.from_version && header.to_version == ref.to_version,
             ErrorKind::kIntegrity, what, ": envelope says versions ", header.from_version, "->",
             header.to_version, ", the route promised ", ref.from_version, "->", ref.to_version);
  if (ref.kind == "anchor") {
    STOA_CHECK(header.kind == pulse::BlobKind::kAnchor, ErrorKind::kIntegrity, what,
               ": the route promised an anchor, the envelope holds a ",
               pulse::blob_kind_name(header.kind));
    // decode_anchor checks every tensor hash, the state hash and the fingerprint field.
    return apply_anchor(ref, pulse::decode_anchor(bytes));
  }
  STOA_CHECK(ref.kind == "patch" && header.kind == pulse::BlobKind::kPatch, ErrorKind::kIntegrity,
             what, ": route kind '", ref.kind, "' and envelope kind ",
             pulse::blob_kind_name(header.kind), " disagree");
  STOA_CHECK(have_state_, ErrorKind::kInvalidArgument, what,
             ": a patch route needs a state to start from");
  // The sync thread is the only writer, so reading state_ without the lock is safe here; the
  // limits bound what a hostile size field can make us allocate.
  pulse::Patch patch = pulse::decode_patch(bytes, pulse::patch_limits_for(state_));
  std::lock_guard lock(mutex_);
  pulse::apply_patch(state_, patch);  // all or nothing; checks fingerprint and hashes
  for (const pulse::TensorPatch& t : patch.tensors) touched_.insert(t.name);
  if (!full_pending_ && patches_held_) {
    patch_values_ += patch.values_written();
    patches_held_ = patch_values_ <= static_cast<uint64_t>(state_.numel()) / 8;
    if (patches_held_)
      patches_.push_back(std::move(patch));
    else
      patches_.clear();
  }
  update_pending_ = true;
  ++counters_.blobs_applied;
}

void WeightSync::apply_anchor(const net::BlobRef& ref, pulse::Int8State fresh) {
  const std::string what = cat("blob ", ref.hash);
  if (expected_config_)
    STOA_CHECK(fresh.config_hash() == *expected_config_, ErrorKind::kIntegrity, what,
               ": anchor is for another model (config hash ", fresh.config_hash().hex(),
               ", this worker runs ", expected_config_->hex(), ")");
  else
    expected_config_ = fresh.config_hash();
  std::lock_guard lock(mutex_);
  if (have_state_)
    STOA_CHECK(fresh.fingerprint() == state_.fingerprint(), ErrorKind::kIntegrity, what,
               ": anchor fingerprint differs from the model this worker holds");
  // The same state again (a fallback to the anchor we already hold): nothing changes, so the
  // engine must not reload every tensor.
  if (have_state_ && fresh.version() == state_.version() &&
      fresh.state_hash() == state_.state_hash()) {
    ++counters_.blobs_applied;
    return;
  }
  state_ = std::move(fresh);
  have_state_ = true;
  full_pending_ = true;
  update_pending_ = true;
  touched_.clear();
  patches_.clear();
  patches_held_ = true;
  patch_values_ = 0;
  ++counters_.blobs_applied;
}

void WeightSync::apply_route(const std::vector<net::BlobRef>& route, bool allow_refetch) {
  for (const net::BlobRef& ref : route) {
    Fetched blob = fetch_verified(ref, allow_refetch);
    try {
      apply_blob(ref, blob);
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
    std::lock_guard lock(mutex_);
    STOA_CHECK(have_state_ && state_.version() == *target.version, ErrorKind::kIntegrity,
               "sync: the route ended at version ", have_state_ ? state_.version() : 0,
               ", not the announced ", *target.version);
    if (!target.state_hash.empty())
      STOA_CHECK(state_.state_hash().hex() == target.state_hash, ErrorKind::kIntegrity,
                 "sync: state hash at version ", *target.version, " is ", state_.state_hash().hex(),
                 ", the hub announced ", target.state_hash);
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
  // The fallback: a cold plan starts with an anchor, which replaces whatever state we had. If it
  // fails part-way it must not leave us further behind than we were (the newest anchor can be
  // older than a state reached by patches): the state held before is put back in that case.
  struct Saved {
    pulse::Int8State state;
    std::set<std::string> touched;
    bool full_pending, update_pending;
    std::vector<pulse::Patch> patches;
    bool patches_held;
    uint64_t patch_values;
  };
  std::optional<Saved> saved;
  {
    std::lock_guard lock(mutex_);
    if (have_state_)
      saved = Saved{state_,   touched_,      full_pending_, update_pending_,
                    patches_, patches_held_, patch_values_};
  }
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
    return !before || state_.version() != *before;
  } catch (const Error& e) {
    std::lock_guard lock(mutex_);
    ++counters_.failed_syncs;
    last_error_ = e.what();
    // Not past the saved version: put it back (at the same version the state is the same —
    // both verified — and restoring the flags spares the engine a needless full reload).
    if (saved && (!have_state_ || state_.version() <= saved->state.version())) {
      state_ = std::move(saved->state);
      touched_ = std::move(saved->touched);
      full_pending_ = saved->full_pending;
      update_pending_ = saved->update_pending;
      patches_ = std::move(saved->patches);
      patches_held_ = saved->patches_held;
      patch_values_ = saved->patch_values;
      have_state_ = true;
    }
    log_error("sync", "anchor fallback failed: ", e.what(), "; keeping version ",
              have_state_ ? std::to_string(state_.version()) : std::string("none"));
    return false;
  }
}

}  // namespace stoa::worker
