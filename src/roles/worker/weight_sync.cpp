#include "roles/worker/weight_sync.h"

#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "net/hub_client.h"
#include "pulse/format.h"
#include "pulse/patch.h"

namespace stoa::worker {

net::VersionInfo HubBlobSource::version(std::optional<uint64_t> after,
                                        std::chrono::seconds timeout) {
  return hub_.version(after, timeout);
}

std::vector<uint8_t> HubBlobSource::blob(const std::string& hash_hex) {
  return hub_.blob(hash_hex);
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

std::optional<WeightUpdate> WeightSync::take_update() {
  std::lock_guard lock(mutex_);
  if (!have_state_ || !update_pending_) return std::nullopt;
  WeightUpdate update;
  update.version = state_.version();
  update.state_hash = state_.state_hash();
  update.full = full_pending_;
  if (full_pending_) {
    for (const auto& [name, tensor] : state_.tensors()) update.tensors.emplace_back(name, tensor);
  } else {
    for (const std::string& name : touched_) update.tensors.emplace_back(name, state_.at(name));
  }
  full_pending_ = false;
  update_pending_ = false;
  touched_.clear();
  return update;
}

std::vector<uint8_t> WeightSync::fetch_verified(const net::BlobRef& ref, bool allow_refetch) {
  Hash128 want;
  STOA_CHECK(Hash128::parse(ref.hash, &want), ErrorKind::kBadFormat, "blob ", ref.kind, " ",
             ref.from_version, "->", ref.to_version, ": bad hash '", ref.hash, "'");
  for (int attempt = 0;; ++attempt) {
    try {
      std::vector<uint8_t> bytes = source_.blob(ref.hash);
      {
        std::lock_guard lock(mutex_);
        counters_.bytes_fetched += bytes.size();
      }
      // The content address is the first line of defence: a truncated or bit-flipped transfer
      // never hashes to the name it was asked for.
      STOA_CHECK(hash_bytes(bytes.data(), bytes.size()) == want, ErrorKind::kIntegrity, "blob ",
                 ref.hash, " (", ref.kind, " ", ref.from_version, "->", ref.to_version,
                 "): ", bytes.size(), " bytes received do not hash to the requested name");
      return bytes;
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

void WeightSync::apply_blob(const net::BlobRef& ref, const std::vector<uint8_t>& bytes) {
  const std::string what = cat("blob ", ref.hash);
  pulse::BlobHeader header = pulse::read_header(bytes, what);
  STOA_CHECK(header.from_version == ref.from_version && header.to_version == ref.to_version,
             ErrorKind::kIntegrity, what, ": envelope says versions ", header.from_version, "->",
             header.to_version, ", the route promised ", ref.from_version, "->", ref.to_version);
  if (ref.kind == "anchor") {
    STOA_CHECK(header.kind == pulse::BlobKind::kAnchor, ErrorKind::kIntegrity, what,
               ": the route promised an anchor, the envelope holds a ",
               pulse::blob_kind_name(header.kind));
    // decode_anchor checks every tensor hash, the state hash and the fingerprint field.
    pulse::Int8State fresh = pulse::decode_anchor(bytes);
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
    ++counters_.blobs_applied;
    return;
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
  update_pending_ = true;
  ++counters_.blobs_applied;
}

void WeightSync::apply_route(const std::vector<net::BlobRef>& route, bool allow_refetch) {
  for (const net::BlobRef& ref : route) {
    std::vector<uint8_t> bytes = fetch_verified(ref, allow_refetch);
    try {
      apply_blob(ref, bytes);
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
  };
  std::optional<Saved> saved;
  {
    std::lock_guard lock(mutex_);
    if (have_state_) saved = Saved{state_, touched_, full_pending_, update_pending_};
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
      have_state_ = true;
    }
    log_error("sync", "anchor fallback failed: ", e.what(), "; keeping version ",
              have_state_ ? std::to_string(state_.version()) : std::string("none"));
    return false;
  }
}

}  // namespace stoa::worker
