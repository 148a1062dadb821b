#include "pulse/catalog.h"

#include <algorithm>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_bytes.h"

namespace stoa::pulse {

void Catalog::add(const CatalogEntry& entry) {
  STOA_CHECK(entry.kind == BlobKind::kAnchor ? entry.from_version == entry.to_version
                                             : entry.from_version < entry.to_version,
             ErrorKind::kInvalidArgument, "catalog: malformed ", blob_kind_name(entry.kind), " ",
             entry.from_version, "->", entry.to_version);
  if (std::find(entries_.begin(), entries_.end(), entry) != entries_.end()) return;
  entries_.push_back(entry);
}

std::optional<uint64_t> Catalog::latest_version() const {
  std::optional<uint64_t> v;
  for (const auto& e : entries_) v = std::max(v.value_or(0), e.to_version);
  return v;
}

std::optional<CatalogEntry> Catalog::newest_anchor(uint64_t at_most) const {
  std::optional<CatalogEntry> best;
  for (const auto& e : entries_)
    if (e.kind == BlobKind::kAnchor && e.to_version <= at_most &&
        (!best || e.to_version > best->to_version))
      best = e;
  return best;
}

std::vector<CatalogEntry> Catalog::plan(std::optional<uint64_t> have, uint64_t target) const {
  STOA_CHECK(!have || *have <= target, ErrorKind::kInvalidArgument, "catch-up: worker at version ",
             *have, " is ahead of the target ", target);
  if (have && *have == target) return {};
  // Shortest path over versions: patches only go forward, so visiting versions in increasing
  // order relaxes every edge after its source is final.
  struct Node {
    uint64_t bytes = std::numeric_limits<uint64_t>::max();
    size_t blobs = 0;
    long via = -1;  // entry index that reached this node; -1 = start (have)
  };
  std::map<uint64_t, Node> nodes;
  auto relax = [&](uint64_t version, uint64_t bytes, size_t blobs, long via) {
    Node& n = nodes[version];
    if (bytes < n.bytes || (bytes == n.bytes && blobs < n.blobs)) n = Node{bytes, blobs, via};
  };
  if (have) relax(*have, 0, 0, -1);
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& e = entries_[i];
    if (e.kind == BlobKind::kAnchor && e.to_version <= target)
      relax(e.to_version, e.bytes, 1, static_cast<long>(i));
  }
  std::multimap<uint64_t, size_t> patches_from;
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].kind == BlobKind::kPatch && entries_[i].to_version <= target)
      patches_from.emplace(entries_[i].from_version, i);
  for (auto it = nodes.begin(); it != nodes.end(); ++it) {
    auto [lo, hi] = patches_from.equal_range(it->first);
    for (auto p = lo; p != hi; ++p) {
      const auto& e = entries_[p->second];
      relax(e.to_version, it->second.bytes + e.bytes, it->second.blobs + 1,
            static_cast<long>(p->second));
    }
  }
  auto found = nodes.find(target);
  STOA_CHECK(found != nodes.end(), ErrorKind::kNotFound, "catch-up: no route from ",
             have ? cat("version ", *have) : std::string("a cold start"), " to version ", target,
             " in the blob store (", entries_.size(), " blobs)");
  std::vector<CatalogEntry> route;
  for (long via = found->second.via; via >= 0;) {
    const auto& e = entries_[static_cast<size_t>(via)];
    route.push_back(e);
    if (e.kind == BlobKind::kAnchor) break;
    via = nodes.at(e.from_version).via;
  }
  std::reverse(route.begin(), route.end());
  return route;
}

std::vector<CatalogEntry> Catalog::retain(const RetentionPolicy& policy) {
  std::vector<uint64_t> anchors;
  for (const auto& e : entries_)
    if (e.kind == BlobKind::kAnchor) anchors.push_back(e.to_version);
  std::sort(anchors.begin(), anchors.end());
  anchors.erase(std::unique(anchors.begin(), anchors.end()), anchors.end());
  if (anchors.empty() || policy.keep_anchors == 0 || anchors.size() <= policy.keep_anchors)
    return {};
  uint64_t oldest_kept = anchors[anchors.size() - policy.keep_anchors];
  std::vector<CatalogEntry> kept, dropped;
  for (const auto& e : entries_) (e.from_version >= oldest_kept ? kept : dropped).push_back(e);
  entries_ = std::move(kept);
  return dropped;
}

std::vector<Hash128> Catalog::hashes() const {
  std::vector<Hash128> out;
  for (const auto& e : entries_) out.push_back(e.hash);
  return out;
}

nlohmann::json Catalog::to_json() const {
  nlohmann::json blobs = nlohmann::json::array();
  for (const auto& e : entries_)
    blobs.push_back({{"kind", blob_kind_name(e.kind)},
                     {"from", e.from_version},
                     {"to", e.to_version},
                     {"hash", e.hash.hex()},
                     {"bytes", e.bytes}});
  return {{"format", "stoa-pulse-catalog-1"}, {"blobs", blobs}};
}

Catalog Catalog::from_json(const nlohmann::json& json, const std::string& source) {
  Catalog c;
  try {
    STOA_CHECK(json.at("format") == "stoa-pulse-catalog-1", ErrorKind::kBadFormat, source,
               ": not a PULSE catalog");
    for (const auto& b : json.at("blobs")) {
      CatalogEntry e;
      std::string kind = b.at("kind").get<std::string>();
      STOA_CHECK(kind == "patch" || kind == "anchor", ErrorKind::kBadFormat, source,
                 ": unknown blob kind '", kind, "'");
      e.kind = kind == "patch" ? BlobKind::kPatch : BlobKind::kAnchor;
      e.from_version = b.at("from").get<uint64_t>();
      e.to_version = b.at("to").get<uint64_t>();
      e.bytes = b.at("bytes").get<uint64_t>();
      STOA_CHECK(Hash128::parse(b.at("hash").get<std::string>(), &e.hash), ErrorKind::kBadFormat,
                 source, ": bad blob hash");
      c.add(e);
    }
  } catch (const nlohmann::json::exception& ex) {
    fail(ErrorKind::kBadFormat, source, ": malformed catalog: ", ex.what());
  } catch (const Error& ex) {
    fail(ErrorKind::kBadFormat, source, ": ", ex.what());
  }
  return c;
}

void Catalog::save(const std::string& path) const {
  std::string text = to_json().dump(1);
  write_file_atomic(path, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

Catalog Catalog::load(const std::string& path) {
  std::vector<uint8_t> bytes = read_file(path);
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& ex) {
    fail(ErrorKind::kBadFormat, path, ": not JSON: ", ex.what());
  }
  return from_json(json, path);
}

Catalog Catalog::scan(const BlobStore& store) {
  Catalog c;
  for (const Hash128& h : store.list()) {
    try {
      std::vector<uint8_t> blob = store.get(h);
      BlobHeader head = read_header(blob, store.path_of(h));
      c.add(CatalogEntry{head.kind, head.from_version, head.to_version, h, blob.size()});
    } catch (const Error&) {
      // Not a PULSE blob (or a corrupt one): a catalog built from headers leaves it out.
    }
  }
  return c;
}

}  // namespace stoa::pulse
