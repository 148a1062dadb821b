// The sender's loop: each new version of the int8 view becomes a patch from the previous one,
// every anchor_every versions also a full anchor; blobs go into the content-addressed store, the
// catalog beside them is updated, and the retention policy prunes what no catch-up route needs.
// The hub serves the store; this class is what its trainer side calls.
//
// The publisher keeps one int8 view: the last published version's. The trainer's path makes the
// next version from its f32 masters straight into that view, tensor by tensor (VersionMaker:
// the patch is recorded as the view changes; anchors are written from the view by
// AnchorFileWriter), so the trainer never holds an f32 copy of its model nor a second int8 state.
// The blobs and the catalog are byte for byte those of publishing int8_view_of(masters) whole
// (tested over anchors and a restart).
//
// After a restart (a new object on a store that holds published versions) the first publish
// rebuilds the view at the catalog's newest version from the store's own blobs (anchor + patches,
// pulse/state_rebuild.h, every blob checked as a worker checks it) and makes the version a patch
// from it: a worker that held any retained version follows with patches, never a re-download.
// The store is the durable copy of the view: it always holds the newest published version (the
// catalog is saved after its blobs), which a trainer checkpoint may lag behind. When the view
// cannot be rebuilt (a blob pruned or corrupt, another model config, a model whose tensors differ
// from the view's), the version goes on a fresh grid as an anchor, and the log says why.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "pulse/blob_store.h"
#include "pulse/catalog.h"
#include "pulse/format.h"
#include "pulse/int8_state.h"

namespace stoa::pulse {

struct PublisherOptions {
  uint64_t anchor_every = 10;  // an anchor at every version divisible by this (and on a fresh grid)
  RetentionPolicy retention;
  EncodeOptions encode;
};

struct Published {
  uint64_t version = 0;
  std::optional<CatalogEntry> patch;
  std::optional<CatalogEntry> anchor;
  std::vector<Hash128> pruned;
  // Set when this publish found no view in memory (the object's first, or the first after a
  // failed one): the version the view was rebuilt at from the store, or else why the version
  // starts a fresh grid ("the store holds no published version" on a new run).
  std::optional<uint64_t> rebuilt_from;
  std::string fresh_grid_reason;
};

// One master tensor: its name, shape and numel(shape) f32 values (valid during the call).
using MasterSink =
    std::function<void(const std::string& name, const Shape& shape, const float* values)>;
// Hands every master tensor of the model to `take` once, one at a time (any order; the trainer's
// is name order).
using MasterStream = std::function<void(const MasterSink& take)>;

class Publisher {
 public:
  // Loads the catalog from <store dir>/catalog.json when present.
  Publisher(BlobStore& store, PublisherOptions options);

  // Publishes `version` (above every published one) made from the masters, on the view's frozen
  // grid with Int8Quantizer's rescale rule. With no view in memory (this object's first publish,
  // e.g. after a restart) the view is first rebuilt from the store (see above); only when that
  // fails do the masters go on a fresh grid, as an anchor. If it throws (a non-finite master, a
  // tensor missing, a full disk), nothing is published and the view is dropped: the next publish
  // rebuilds it from the store, as after a restart.
  Published publish(uint64_t version, const Hash128& config_hash, const MasterStream& masters);
  // Publishes a whole int8 state (tests, and tools that hold one); same rules and bytes (a
  // rebuilt view must have the state's fingerprint, else the state is the anchor).
  Published publish(Int8State state);

  const Catalog& catalog() const { return catalog_; }
  // The view at the last published version (null before the first).
  const Int8State* current() const { return current_ ? &*current_ : nullptr; }
  std::string catalog_path() const;

 private:
  void check_newer(uint64_t version) const;
  // Sets current_ to the view at the catalog's newest version, rebuilt from the store, when it
  // can be and is of `config_hash`; else leaves it empty and returns why.
  std::string rebuild_view(const Hash128& config_hash);
  void fresh_view(uint64_t version, const Hash128& config_hash, const MasterStream& masters);
  // Makes `version` in the view; `*mismatch` is set when it throws because the masters are not
  // the view's tensors (names, shapes, carriers).
  Patch update_view(uint64_t version, const Hash128& config_hash, const MasterStream& masters,
                    bool* mismatch);
  CatalogEntry write_anchor(const Int8State& view);
  // Adds the version's blobs to the catalog, saves it and prunes.
  Published record(uint64_t version, std::optional<CatalogEntry> patch,
                   std::optional<CatalogEntry> anchor);
  bool anchor_due(uint64_t version, bool fresh) const;

  BlobStore& store_;
  PublisherOptions options_;
  Catalog catalog_;
  std::optional<Int8State> current_;
};

}  // namespace stoa::pulse
