#include "pulse/publisher.h"

#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "pulse/anchor_writer.h"
#include "pulse/patch.h"
#include "pulse/version_maker.h"

namespace stoa::pulse {

namespace fs = std::filesystem;

Publisher::Publisher(BlobStore& store, PublisherOptions options)
    : store_(store), options_(options) {
  STOA_CHECK(options_.anchor_every >= 1, ErrorKind::kInvalidArgument,
             "publisher: anchor_every must be >= 1");
  if (fs::exists(catalog_path())) catalog_ = Catalog::load(catalog_path());
}

std::string Publisher::catalog_path() const {
  return (fs::path(store_.dir()) / "catalog.json").string();
}

void Publisher::check_newer(uint64_t version) const {
  std::optional<uint64_t> latest = catalog_.latest_version();
  STOA_CHECK(!latest || version > *latest, ErrorKind::kInvalidArgument, "publisher: version ",
             version, " is not newer than the published ", latest.value_or(0));
}

bool Publisher::anchor_due(uint64_t version, bool first) const {
  return first || version % options_.anchor_every == 0;
}

Published Publisher::publish(uint64_t version, const Hash128& config_hash,
                             const MasterStream& masters) {
  check_newer(version);
  const bool first = !current_;
  std::optional<CatalogEntry> patch_entry, anchor_entry;
  try {
    if (first) {
      Int8State view;
      view.set_version(version);
      view.set_config_hash(config_hash);
      masters([&](const std::string& name, const Shape& shape, const float* values) {
        view.add(name, fresh_view_tensor(name, shape, values));
      });
      current_ = std::move(view);
    } else {
      const Patch patch = update_view(version, config_hash, masters);
      const std::vector<uint8_t> blob = encode_patch(patch, options_.encode);
      patch_entry = CatalogEntry{BlobKind::kPatch, patch.from_version, patch.to_version,
                                 store_.put(blob), blob.size()};
    }
    if (anchor_due(version, first)) anchor_entry = write_anchor(*current_);
  } catch (...) {
    current_.reset();  // possibly half updated: never diffed against
    throw;
  }
  return record(version, patch_entry, anchor_entry);
}

Patch Publisher::update_view(uint64_t version, const Hash128& config_hash,
                             const MasterStream& masters) {
  Int8State& view = *current_;
  STOA_CHECK(view.config_hash() == config_hash, ErrorKind::kInvalidArgument, "publisher: version ",
             version, " is of another model config than the view at ", view.version());
  VersionMaker maker(view.version(), version, config_hash);
  StateEditor edit(view);
  size_t given = 0;
  masters([&](const std::string& name, const Shape& shape, const float* values) {
    STOA_CHECK(view.has(name) && view.at(name).shape == shape, ErrorKind::kInvalidArgument,
               "publisher: tensor '", name, "' ", shape_string(shape), " is not in the view");
    const Hash128 old_hash = view.tensor_hash(name);
    edit.set_hash(name, maker.tensor(name, edit.tensor(name), old_hash, values));
    ++given;  // a tensor given twice throws in the maker
  });
  STOA_CHECK(given == view.size(), ErrorKind::kInvalidArgument, "publisher: ", view.size() - given,
             " of the view's ", view.size(), " tensors were not given");
  view.set_version(version);
  return maker.finish();
}

CatalogEntry Publisher::write_anchor(const Int8State& view) {
  std::vector<TensorLayout> layouts;
  layouts.reserve(view.size());
  for (const auto& [name, t] : view.tensors()) layouts.push_back({name, t.kind, t.shape});
  // In the store's directory (the rename stays in one file system), under a name that is no
  // content address (the store never lists it).
  const std::string path =
      (fs::path(store_.dir()) / cat("anchor-", view.version(), ".tmp.", ::getpid())).string();
  AnchorFileWriter writer(path, view.version(), view.config_hash(), std::move(layouts),
                          options_.encode.zstd_level);
  for (const auto& [name, t] : view.tensors()) writer.add(name, t);
  const WrittenAnchor written = writer.finish();
  adopt_into_store(path, store_.path_of(written.blob_hash));
  return CatalogEntry{BlobKind::kAnchor, view.version(), view.version(), written.blob_hash,
                      written.bytes};
}

Published Publisher::publish(Int8State state) {
  check_newer(state.version());
  const bool first = !current_;
  std::optional<CatalogEntry> patch_entry, anchor_entry;
  if (!first) {
    const Patch patch = make_patch(*current_, state);
    const std::vector<uint8_t> blob = encode_patch(patch, options_.encode);
    patch_entry = CatalogEntry{BlobKind::kPatch, patch.from_version, patch.to_version,
                               store_.put(blob), blob.size()};
  }
  if (anchor_due(state.version(), first)) anchor_entry = write_anchor(state);
  Published out = record(state.version(), patch_entry, anchor_entry);
  current_ = std::move(state);
  return out;
}

Published Publisher::record(uint64_t version, std::optional<CatalogEntry> patch,
                            std::optional<CatalogEntry> anchor) {
  Published out;
  out.version = version;
  out.patch = patch;
  out.anchor = anchor;
  if (patch) catalog_.add(*patch);
  if (anchor) catalog_.add(*anchor);
  catalog_.retain(options_.retention);
  // Save the catalog before pruning: a crash in between leaves unreferenced blobs (harmless),
  // never a catalog that names a deleted blob.
  catalog_.save(catalog_path());
  out.pruned = store_.prune(catalog_.hashes());
  return out;
}

}  // namespace stoa::pulse
