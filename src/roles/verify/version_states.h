// The int8 weights of any published version, rebuilt from the hub's own PULSE blobs (an anchor,
// then patches, through the catalog the publisher keeps beside them: pulse/state_rebuild.h, which
// the publisher's restart uses too): the same bytes every worker reconstructs, so a replay runs on
// exactly what the worker ran. States are rebuilt on demand and the last few are kept, because
// replays cluster around the newest versions (the staleness window) and a patch forward from a kept
// state is much cheaper than a route from an anchor.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

#include "pulse/blob_store.h"
#include "pulse/catalog.h"
#include "pulse/int8_state.h"

namespace stoa::verify {

class VersionStates {
 public:
  // `store` (with <dir>/catalog.json) must outlive this; keeps up to `keep` states in memory.
  explicit VersionStates(const pulse::BlobStore& store, size_t keep = 3);
  // A validator away from the hub (`stoa validate`) holds a mirror of the hub's store: when the
  // local catalog has no route to a version `refresh_catalog` rewrites <dir>/catalog.json from the
  // hub, and a blob on the route that the store lacks is put there by `fetch_blob` first (then
  // read and checked like any other).
  struct Mirror {
    std::function<void()> refresh_catalog;
    std::function<void(const pulse::CatalogEntry&)> fetch_blob;
  };
  VersionStates(const pulse::BlobStore& store, size_t keep, Mirror mirror);

  // The verified state at `version` (every blob is checked as the worker checks it: hashes,
  // fingerprint, the resulting state hash). kNotFound when no route reaches it (never published,
  // or pruned). The reference stays valid until the next call.
  const pulse::Int8State& at(uint64_t version);

 private:
  const pulse::BlobStore& store_;
  size_t keep_;
  Mirror mirror_;
  std::map<uint64_t, pulse::Int8State> kept_;
  std::mutex mutex_;
};

}  // namespace stoa::verify
