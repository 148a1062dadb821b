#include "roles/verify/version_states.h"

#include <optional>

#include "core/error.h"
#include "pulse/catalog.h"
#include "pulse/state_rebuild.h"

namespace stoa::verify {

VersionStates::VersionStates(const pulse::BlobStore& store, size_t keep)
    : store_(store), keep_(keep < 2 ? 2 : keep) {}

VersionStates::VersionStates(const pulse::BlobStore& store, size_t keep, Mirror mirror)
    : store_(store), keep_(keep < 2 ? 2 : keep), mirror_(std::move(mirror)) {}

const pulse::Int8State& VersionStates::at(uint64_t version) {
  std::lock_guard lock(mutex_);
  if (auto it = kept_.find(version); it != kept_.end()) return it->second;
  // Re-read every time we miss: the publisher appends to it while the hub runs.
  const std::string catalog_path = store_.dir() + "/catalog.json";
  if (mirror_.refresh_catalog) {
    bool reaches = false;
    try {
      const pulse::Catalog local = pulse::Catalog::load(catalog_path);
      (void)local.plan(std::nullopt, version);
      reaches = true;
    } catch (const Error&) {
    }
    if (!reaches) mirror_.refresh_catalog();
  }
  const pulse::Catalog catalog = pulse::Catalog::load(catalog_path);
  // Start from the newest kept state below the target when patches lead from it; else cold.
  std::optional<uint64_t> from;
  std::vector<pulse::CatalogEntry> route;
  for (auto it = kept_.rbegin(); it != kept_.rend() && !from; ++it) {
    if (it->first > version) continue;
    try {
      route = catalog.plan(it->first, version);
      from = it->first;
    } catch (const Error&) {
    }
  }
  if (!from) route = catalog.plan(std::nullopt, version);
  if (mirror_.fetch_blob)
    for (const pulse::CatalogEntry& e : route)
      if (!store_.contains(e.hash)) mirror_.fetch_blob(e);
  pulse::Int8State state;
  if (from) state = kept_.at(*from);
  pulse::apply_route(state, store_, route);
  STOA_CHECK(state.version() == version, ErrorKind::kNotFound, "verify: the route to version ",
             version, " ended at ", state.version());
  while (kept_.size() >= keep_) kept_.erase(kept_.begin());  // the oldest go first
  return kept_.emplace(version, std::move(state)).first->second;
}

}  // namespace stoa::verify
