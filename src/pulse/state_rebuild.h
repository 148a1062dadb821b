// The int8 state at a published version, rebuilt from a store's own PULSE blobs along a catalog
// route (an anchor, then patches): the bytes every worker reconstructs, checked as a worker checks
// them. The hub's replay verification (roles/verify/version_states.h) rebuilds the versions its
// rollouts ran on this way, and the publisher rebuilds its view after a restart (publisher.h), so
// that the next version is a patch and not an anchor.
#pragma once
#include <cstdint>
#include <vector>

#include "pulse/blob_store.h"
#include "pulse/catalog.h"
#include "pulse/int8_state.h"

namespace stoa::pulse {

// Applies the blobs of `route` (Catalog::plan's answer, in apply order) to `state`: an anchor
// replaces it (decoded streaming from its file, so the blob is never held whole; when `state`
// holds tensors, the anchor must be of the same model), a patch is applied all or nothing. Every
// blob is checked on the way: its content address, the envelope, every tensor hash, the
// fingerprint, the resulting state hash, and that it is the version the catalog says. Throws
// kNotFound when a blob is missing from the store, kIntegrity / kBadFormat when one does not
// check out (the state is then unspecified: discard it).
void apply_route(Int8State& state, const BlobStore& store, const std::vector<CatalogEntry>& route);

// The state at `version` from a cold start, along the catalog's cheapest route. kNotFound when
// the catalog has no route to it (never published, or pruned) or a blob of the route is missing.
Int8State rebuild_state(const BlobStore& store, const Catalog& catalog, uint64_t version);

}  // namespace stoa::pulse
