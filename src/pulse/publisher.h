// The sender's loop: each new version of the int8 view becomes a patch from the previous one,
// every anchor_every versions also a full anchor; blobs go into the content-addressed store, the
// catalog beside them is updated, and the retention policy prunes what no catch-up route needs.
// The hub (a later issue) serves the store; this class is what its trainer side calls.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pulse/blob_store.h"
#include "pulse/catalog.h"
#include "pulse/format.h"
#include "pulse/int8_state.h"

namespace stoa::pulse {

struct PublisherOptions {
  uint64_t anchor_every = 10;  // an anchor at every version divisible by this (and the first)
  RetentionPolicy retention;
  EncodeOptions encode;
};

struct Published {
  uint64_t version = 0;
  std::optional<CatalogEntry> patch;
  std::optional<CatalogEntry> anchor;
  std::vector<Hash128> pruned;
};

class Publisher {
 public:
  // Loads the catalog from <store dir>/catalog.json when present.
  Publisher(BlobStore& store, PublisherOptions options);

  // Publishes the next version (state.version() must be above every published one). The first
  // version published by this object is always an anchor (there is no previous view to diff).
  Published publish(Int8State state);

  const Catalog& catalog() const { return catalog_; }
  const Int8State* current() const { return current_ ? &*current_ : nullptr; }
  std::string catalog_path() const;

 private:
  BlobStore& store_;
  PublisherOptions options_;
  Catalog catalog_;
  std::optional<Int8State> current_;
};

}  // namespace stoa::pulse
