#include "pulse/publisher.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "pulse/anchor_writer.h"
#include "pulse/patch.h"
#include "pulse/state_rebuild.h"
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

bool Publisher::anchor_due(uint64_t version, bool fresh) const {
  return fresh || version % options_.anchor_every == 0;
}

std::string Publisher::rebuild_view(const Hash128& config_hash) {
  const std::optional<uint64_t> latest = catalog_.latest_version();
  if (!latest) return "the store holds no published version";
  const auto started = std::chrono::steady_clock::now();
  Int8State view;
  try {
    view = rebuild_state(store_, catalog_, *latest);
  } catch (const std::exception& e) {
    return cat("the view at version ", *latest, " cannot be rebuilt from the store: ", e.what());
  }
  if (view.config_hash() != config_hash)
    return cat("the view at version ", *latest, " is of another model config (hash ",
               view.config_hash().hex(), ", this model's ", config_hash.hex(), ")");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  log_info("publisher", "rebuilt the int8 view at version ", *latest, " from the store (",
           view.size(), " tensors, ", view.nbytes(), " bytes, state ", view.state_hash().hex(),
           ") in ", seconds, " s: the next version continues from it");
  current_ = std::move(view);
  return "";
}

void Publisher::fresh_view(uint64_t version, const Hash128& config_hash,
                           const MasterStream& masters) {
  Int8State view;
  view.set_version(version);
  view.set_config_hash(config_hash);
  masters([&](const std::string& name, const Shape& shape, const float* values) {
    view.add(name, fresh_view_tensor(name, shape, values));
  });
  current_ = std::move(view);
}

namespace {

// A restarted publisher that could not continue from the published view says why once: every
// worker will download the anchor.
void log_fresh_grid(uint64_t version, const Catalog& catalog, const std::string& reason) {
  if (catalog.latest_version())
    log_warn("publisher", "version ", version, " starts a fresh int8 grid (an anchor every worker ",
             "downloads whole): ", reason);
}

}  // namespace

Published Publisher::publish(uint64_t version, const Hash128& config_hash,
                             const MasterStream& masters) {
  check_newer(version);
  std::optional<uint64_t> rebuilt_from;
  std::string fresh_reason;
  if (!current_) {
    fresh_reason = rebuild_view(config_hash);
    if (current_) rebuilt_from = current_->version();
  }
  std::optional<CatalogEntry> patch_entry, anchor_entry;
  try {
    if (current_) {
      bool mismatch = false;
      try {
        const Patch patch = update_view(version, config_hash, masters, &mismatch);
        const std::vector<uint8_t> blob = encode_patch(patch, options_.encode);
        patch_entry = CatalogEntry{BlobKind::kPatch, patch.from_version, patch.to_version,
                                   store_.put(blob), blob.size()};
      } catch (const Error& e) {
        // A rebuilt view the model does not fit (its tensors changed under the same config,
        // e.g. a build with another precision plan) is no reason to fail: the masters go on a
        // fresh grid (an anchor). Anything else (a non-finite master, a full disk) fails the
        // version, as it would without the restart.
        if (!rebuilt_from || !mismatch) throw;
        current_.reset();
        fresh_reason = cat("the view rebuilt at version ", *rebuilt_from,
                           " does not fit the model: ", e.what());
        rebuilt_from.reset();
      }
    }
    const bool fresh = !current_;
    if (fresh) {
      log_fresh_grid(version, catalog_, fresh_reason);
      fresh_view(version, config_hash, masters);
    }
    if (anchor_due(version, fresh)) anchor_entry = write_anchor(*current_);
  } catch (...) {
    current_.reset();  // possibly half updated: never diffed against
    throw;
  }
  Published out = record(version, patch_entry, anchor_entry);
  out.rebuilt_from = rebuilt_from;
  if (!rebuilt_from) out.fresh_grid_reason = fresh_reason;
  return out;
}

Patch Publisher::update_view(uint64_t version, const Hash128& config_hash,
                             const MasterStream& masters, bool* mismatch) {
  Int8State& view = *current_;
  *mismatch = false;
  // Marks a failed check as the masters not fitting the view (not bad values, not the disk).
  const auto fits = [mismatch](bool ok) {
    if (!ok) *mismatch = true;
    return ok;
  };
  STOA_CHECK(fits(view.config_hash() == config_hash), ErrorKind::kInvalidArgument,
             "publisher: version ", version, " is of another model config than the view at ",
             view.version());
  VersionMaker maker(view.version(), version, config_hash);
  StateEditor edit(view);
  size_t given = 0;
  masters([&](const std::string& name, const Shape& shape, const float* values) {
    STOA_CHECK(fits(view.has(name) && view.at(name).shape == shape &&
                    view.at(name).kind == tensor_kind_for(name, shape)),
               ErrorKind::kInvalidArgument, "publisher: tensor '", name, "' ", shape_string(shape),
               " is not in the view");
    const Hash128 old_hash = view.tensor_hash(name);
    edit.set_hash(name, maker.tensor(name, edit.tensor(name), old_hash, values));
    ++given;  // a tensor given twice throws in the maker
  });
  STOA_CHECK(fits(given == view.size()), ErrorKind::kInvalidArgument,
             "publisher: ", view.size() - given, " of the view's ", view.size(),
             " tensors were not given");
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
  std::optional<uint64_t> rebuilt_from;
  std::string fresh_reason;
  if (!current_) {
    fresh_reason = rebuild_view(state.config_hash());
    if (current_ && current_->fingerprint() != state.fingerprint()) {
      fresh_reason = cat("the view rebuilt at version ", current_->version(),
                         " has another fingerprint than the state's");
      current_.reset();
    }
    if (current_) rebuilt_from = current_->version();
  }
  const bool fresh = !current_;
  if (fresh) log_fresh_grid(state.version(), catalog_, fresh_reason);
  std::optional<CatalogEntry> patch_entry, anchor_entry;
  if (!fresh) {
    const Patch patch = make_patch(*current_, state);
    const std::vector<uint8_t> blob = encode_patch(patch, options_.encode);
    patch_entry = CatalogEntry{BlobKind::kPatch, patch.from_version, patch.to_version,
                               store_.put(blob), blob.size()};
  }
  if (anchor_due(state.version(), fresh)) anchor_entry = write_anchor(state);
  Published out = record(state.version(), patch_entry, anchor_entry);
  out.rebuilt_from = rebuilt_from;
  if (!rebuilt_from) out.fresh_grid_reason = fresh_reason;
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
