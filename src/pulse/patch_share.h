// What the patches a run published wrote, read back from its blob store: per version, the share
// of the int8 view's values its patch writes (points plus 32 per rescaled group, over every int8
// value of the view). The sparsity PULSE's patch size follows; LoRA against full fine-tuning is
// compared on it (docs/design/train.md) and `stoa demo` reports its mean.
// Only the blobs the store still holds count: retention (catalog.h) prunes old patches.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace stoa::pulse {

struct PatchShares {
  int64_t int8_values = 0;                // values on the view's int8 grid (0: no anchor held)
  std::map<uint64_t, double> int8_share;  // by the patch's to_version
  std::set<std::string> touched;          // every tensor a held patch wrote
  // The mean share over the held patches; NaN when there is none.
  double mean() const;
};

// Reads <blob_dir>/catalog.json and the blobs it names (each verified against its hash).
// Throws kNotFound for a missing catalog or blob, kBadFormat / kIntegrity for a bad one.
PatchShares patch_shares(const std::string& blob_dir);

}  // namespace stoa::pulse
