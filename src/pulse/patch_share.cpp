#include "pulse/patch_share.h"

#include <cmath>
#include <filesystem>

#include "pulse/blob_store.h"
#include "pulse/catalog.h"
#include "pulse/format.h"

namespace stoa::pulse {

double PatchShares::mean() const {
  if (int8_share.empty()) return NAN;
  double sum = 0;
  for (const auto& [version, share] : int8_share) sum += share;
  return sum / static_cast<double>(int8_share.size());
}

PatchShares patch_shares(const std::string& blob_dir) {
  const BlobStore store(blob_dir);
  const Catalog catalog =
      Catalog::load((std::filesystem::path(blob_dir) / "catalog.json").string());
  PatchShares out;
  // Every version of a run has the same int8 grid, so any anchor gives the count.
  for (const CatalogEntry& e : catalog.entries())
    if (e.kind == BlobKind::kAnchor) {
      out.int8_values = decode_anchor(store.get(e.hash)).int8_numel();
      break;
    }
  if (out.int8_values == 0) return out;
  for (const CatalogEntry& e : catalog.entries()) {
    if (e.kind != BlobKind::kPatch) continue;
    const Patch patch = decode_patch(store.get(e.hash));
    uint64_t written = 0;
    for (const TensorPatch& t : patch.tensors) {
      out.touched.insert(t.name);
      if (t.kind == TensorKind::kInt8) written += t.values_written();
    }
    out.int8_share[e.to_version] =
        static_cast<double>(written) / static_cast<double>(out.int8_values);
  }
  return out;
}

}  // namespace stoa::pulse
