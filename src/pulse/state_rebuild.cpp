#include "pulse/state_rebuild.h"

#include "core/error.h"
#include "pulse/anchor_stream.h"
#include "pulse/format.h"
#include "pulse/patch.h"

namespace stoa::pulse {

void apply_route(Int8State& state, const BlobStore& store, const std::vector<CatalogEntry>& route) {
  for (const CatalogEntry& e : route) {
    const std::string what = cat(blob_kind_name(e.kind), " ", e.from_version, "->", e.to_version,
                                 " (blob ", e.hash.hex(), ")");
    STOA_CHECK(store.contains(e.hash), ErrorKind::kNotFound, "rebuild: ", what,
               " is not in the store ", store.dir());
    if (e.kind == BlobKind::kAnchor) {
      Int8State anchor = decode_anchor_file(store.path_of(e.hash), &e.hash);
      if (state.size() > 0)
        STOA_CHECK(anchor.fingerprint() == state.fingerprint(), ErrorKind::kIntegrity,
                   "rebuild: ", what, " is for another model");
      state = std::move(anchor);
    } else {
      const std::vector<uint8_t> bytes = store.get(e.hash);  // checks the content address
      apply_patch(state, decode_patch(bytes, patch_limits_for(state)));
    }
    // The blob's own header names its versions; the catalog must agree with it.
    STOA_CHECK(state.version() == e.to_version, ErrorKind::kIntegrity, "rebuild: ", what,
               " led to version ", state.version());
  }
}

Int8State rebuild_state(const BlobStore& store, const Catalog& catalog, uint64_t version) {
  Int8State state;
  apply_route(state, store, catalog.plan(std::nullopt, version));
  STOA_CHECK(state.version() == version, ErrorKind::kNotFound, "rebuild: the route to version ",
             version, " ended at ", state.version());
  return state;
}

}  // namespace stoa::pulse
