#include "pulse/publisher.h"

#include <filesystem>

#include "core/error.h"
#include "pulse/patch.h"

namespace stoa::pulse {

Publisher::Publisher(BlobStore& store, PublisherOptions options)
    : store_(store), options_(options) {
  STOA_CHECK(options_.anchor_every >= 1, ErrorKind::kInvalidArgument,
             "publisher: anchor_every must be >= 1");
  if (std::filesystem::exists(catalog_path())) catalog_ = Catalog::load(catalog_path());
}

std::string Publisher::catalog_path() const {
  return (std::filesystem::path(store_.dir()) / "catalog.json").string();
}

Published Publisher::publish(Int8State state) {
  std::optional<uint64_t> latest = catalog_.latest_version();
  STOA_CHECK(!latest || state.version() > *latest, ErrorKind::kInvalidArgument,
             "publisher: version ", state.version(), " is not newer than the published ",
             latest.value_or(0));
  Published out;
  out.version = state.version();
  if (current_) {
    Patch patch = make_patch(*current_, state);
    std::vector<uint8_t> blob = encode_patch(patch, options_.encode);
    Hash128 h = store_.put(blob);
    out.patch =
        CatalogEntry{BlobKind::kPatch, patch.from_version, patch.to_version, h, blob.size()};
    catalog_.add(*out.patch);
  }
  if (!current_ || state.version() % options_.anchor_every == 0) {
    std::vector<uint8_t> blob = encode_anchor(state, options_.encode.zstd_level);
    Hash128 h = store_.put(blob);
    out.anchor = CatalogEntry{BlobKind::kAnchor, state.version(), state.version(), h, blob.size()};
    catalog_.add(*out.anchor);
  }
  catalog_.retain(options_.retention);
  // Save the catalog before pruning: a crash in between leaves unreferenced blobs (harmless),
  // never a catalog that names a deleted blob.
  catalog_.save(catalog_path());
  out.pruned = store_.prune(catalog_.hashes());
  current_ = std::move(state);
  return out;
}

}  // namespace stoa::pulse
