// The versions of the run's weights as the hub answers about them: the versions published (the
// ledger's rows, restored at start) and the blob catalog beside the store's blobs, which plans a
// worker's catch-up — the patches from its version, or an anchor first when no patch route
// starts there (older than the retention). Invariants: the latest version is the newer of the
// newest recorded and the catalog's newest, whichever of the two knows it (a version recorded
// with no blobs in the store is still the latest, with no route to it); every add() reloads the
// catalog, so a version's blobs are planned from its publication on. Not thread-safe: the Hub
// calls it under its lock.
#pragma once
#include <cstdint>
#include <map>
#include <optional>

#include "core/hash.h"
#include "net/protocol.h"
#include "pulse/blob_store.h"
#include "pulse/catalog.h"
#include "pulse/publisher.h"
#include "roles/hub/ledger/ledger.h"

namespace stoa::hub {

class VersionCatalog {
 public:
  // `store` holds the blobs and their catalog.json (read at restore() and each add(), not here);
  // `max_staleness` is told to workers with every answer.
  VersionCatalog(const pulse::BlobStore* store, uint64_t max_staleness);

  // The versions the ledger recorded; reloads the catalog.
  void restore(const std::vector<VersionRow>& published);
  // A version just published; reloads the catalog, which now names its blobs.
  void add(const VersionRow& row);

  bool published(uint64_t version) const { return published_.count(version) > 0; }
  uint64_t latest_published() const { return published_.empty() ? 0 : published_.rbegin()->first; }
  size_t published_count() const { return published_.size(); }
  std::optional<uint64_t> latest() const;
  // What a worker at `after` (nullopt: none yet) fetches to reach the latest version: the
  // version, its state hash and the blobs in apply order (none when it is there already, or
  // when the store holds no route: a version published bare, as only tests do).
  net::VersionInfo info(std::optional<uint64_t> after) const;

 private:
  void reload();

  const pulse::BlobStore* store_;
  uint64_t max_staleness_;
  std::map<uint64_t, VersionRow> published_;
  pulse::Catalog catalog_;
};

// The ledger's row of a version the trainer published at `now_ms`: its state hash and blobs.
VersionRow version_row(const pulse::Published& published, const Hash128& state_hash,
                       int64_t now_ms);

}  // namespace stoa::hub
