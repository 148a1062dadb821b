#include "roles/hub/versions/version_catalog.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace stoa::hub {

VersionCatalog::VersionCatalog(const pulse::BlobStore* store, uint64_t max_staleness)
    : store_(store), max_staleness_(max_staleness) {}

void VersionCatalog::restore(const std::vector<VersionRow>& published) {
  for (const auto& v : published) published_[v.version] = v;
  reload();
}

void VersionCatalog::add(const VersionRow& row) {
  published_[row.version] = row;
  reload();
}

void VersionCatalog::reload() {
  std::string path = store_->dir() + "/catalog.json";
  if (std::filesystem::exists(path)) {
    catalog_ = pulse::Catalog::load(path);
  } else {
    catalog_ = pulse::Catalog::scan(*store_);
  }
}

std::optional<uint64_t> VersionCatalog::latest() const {
  auto latest = catalog_.latest_version();
  if (!published_.empty() && (!latest || published_.rbegin()->first > *latest))
    latest = published_.rbegin()->first;
  return latest;
}

net::VersionInfo VersionCatalog::info(std::optional<uint64_t> after) const {
  net::VersionInfo info;
  info.max_staleness = max_staleness_;
  auto latest = this->latest();
  if (!latest) return info;
  info.version = latest;
  if (auto it = published_.find(*latest); it != published_.end())
    info.state_hash = it->second.state_hash;
  if (after && *after >= *latest) return info;
  std::vector<pulse::CatalogEntry> route;
  try {
    route = catalog_.plan(after, *latest);
  } catch (const Error&) {
    // No patch route from the worker's version (older than the retention): restart from an
    // anchor. If even that fails (the version's blobs are not in the store — only in tests that
    // publish bare versions), the worker gets the version with no blobs and polls again.
    try {
      route = catalog_.plan(std::nullopt, *latest);
    } catch (const Error&) {
      route.clear();
    }
  }
  for (const auto& e : route) {
    info.blobs.push_back({e.kind == pulse::BlobKind::kAnchor ? "anchor" : "patch", e.from_version,
                          e.to_version, e.hash.hex(), e.bytes});
  }
  return info;
}

VersionRow version_row(const pulse::Published& published, const Hash128& state_hash,
                       int64_t now_ms) {
  VersionRow row;
  row.version = published.version;
  row.state_hash = state_hash.hex();
  row.published_ms = now_ms;
  nlohmann::json blobs = nlohmann::json::array();
  for (const auto* e : {&published.patch, &published.anchor}) {
    if (!*e) continue;
    blobs.push_back({{"kind", pulse::blob_kind_name((*e)->kind)},
                     {"from_version", (*e)->from_version},
                     {"to_version", (*e)->to_version},
                     {"hash", (*e)->hash.hex()},
                     {"bytes", (*e)->bytes}});
  }
  row.blobs_json = blobs.dump();
  return row;
}

}  // namespace stoa::hub
