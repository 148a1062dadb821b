// What the blob store holds, by version: which blob is the patch a -> b and which the anchor at
// v. The catalog is small JSON kept beside the blobs (and can be rebuilt from the blob headers),
// and it answers the catch-up question: given a worker's version, which blobs to fetch.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/hash.h"
#include "pulse/blob_store.h"
#include "pulse/format.h"

namespace stoa::pulse {

struct CatalogEntry {
  BlobKind kind = BlobKind::kPatch;
  uint64_t from_version = 0;  // anchors: == to_version
  uint64_t to_version = 0;
  Hash128 hash;
  uint64_t bytes = 0;
  bool operator==(const CatalogEntry&) const = default;
};

struct RetentionPolicy {
  // Keep the newest keep_anchors anchors and every patch that starts at or after the oldest of
  // them; older blobs go. A worker older than the oldest kept anchor restarts from an anchor.
  size_t keep_anchors = 3;
};

class Catalog {
 public:
  void add(const CatalogEntry& entry);  // ignores an exact duplicate
  const std::vector<CatalogEntry>& entries() const { return entries_; }
  std::optional<uint64_t> latest_version() const;
  std::optional<CatalogEntry> newest_anchor(uint64_t at_most) const;

  // The cheapest (fewest bytes, then fewest blobs) list of blobs that brings a worker from
  // `have` (nullopt: a cold start) to `target`, in apply order: optionally one anchor, then
  // patches oldest first. Empty when have == target. kNotFound when no route exists.
  std::vector<CatalogEntry> plan(std::optional<uint64_t> have, uint64_t target) const;

  // Applies the policy; returns the entries it dropped (their blobs may then be pruned).
  std::vector<CatalogEntry> retain(const RetentionPolicy& policy);
  std::vector<Hash128> hashes() const;

  nlohmann::json to_json() const;
  static Catalog from_json(const nlohmann::json& json, const std::string& source);
  void save(const std::string& path) const;  // atomic
  static Catalog load(const std::string& path);
  // Rebuilds the catalog from the headers of every blob in the store (blobs whose header does
  // not check out are skipped).
  static Catalog scan(const BlobStore& store);

 private:
  std::vector<CatalogEntry> entries_;
};

}  // namespace stoa::pulse
