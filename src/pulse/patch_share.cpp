#include "pulse/patch_share.h"

#include <cmath>
#include <filesystem>

#include "pulse/anchor_stream.h"
#include "pulse/blob_store.h"
#include "pulse/catalog.h"
#include "pulse/format.h"

namespace stoa::pulse {
namespace {

// Counts an anchor's int8 values as it streams by: one tensor in memory at a time, never the
// whole state (an 8B model's anchor is ~9 GB).
class Int8Counter final : public AnchorSink {
 public:
  void begin(const BlobHeader&, const Hash128&) override {}
  void tensor(const std::string&, StateTensor tensor, const Hash128&) override {
    if (tensor.kind == TensorKind::kInt8) values += tensor.numel();
  }
  int64_t values = 0;
};

}  // namespace

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
      Int8Counter counter;
      (void)stream_anchor_file(store.path_of(e.hash), &e.hash, counter);
      out.int8_values = counter.values;
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
