// The trainer's side of one PULSE version, made tensor by tensor: for each tensor the trainer
// hands its int8 view (the one copy it keeps) and the new f32 masters; the maker quantises them
// on the view's frozen grid (Int8Quantizer's rescale rule, same bits), writes the values that
// changed into the view in place and records them as that tensor's patch section. The whole
// new view never exists beside the old one: the memory is one tensor's masters (the caller's)
// plus the patch. finish() returns the patch of make_patch(old view, new view), bit for bit
// (tested), with the result's tensor and state hashes.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/hash.h"
#include "pulse/int8_state.h"
#include "pulse/patch.h"
#include "pulse/quantizer.h"

namespace stoa::pulse {

struct VersionMakeStats {
  int64_t values = 0;           // every value of every tensor seen
  int64_t changed = 0;          // values the patch writes (points + 32 per rescaled group)
  int64_t rescaled_groups = 0;  // int8 groups whose scale was re-chosen
};

class VersionMaker {
 public:
  VersionMaker(uint64_t from_version, uint64_t to_version, const Hash128& config_hash,
               RescaleRule rule = {});

  // `view` is tensor `name` of the int8 view at from_version (its hash `view_hash`), `master`
  // its numel() new f32 master values. On return `view` is the tensor at to_version; returns
  // its hash. Every tensor of the model must be given once (any order). Throws
  // kInvalidArgument for a non-finite master value, leaving `view` unchanged.
  Hash128 tensor(const std::string& name, StateTensor& view, const Hash128& view_hash,
                 const float* master);

  // The patch from_version -> to_version (tensors sorted by name).
  Patch finish();
  const VersionMakeStats& stats() const { return stats_; }

 private:
  TensorPatch int8_section(StateTensor& view, const float* master);
  uint64_t from_;
  uint64_t to_;
  Hash128 config_hash_;
  RescaleRule rule_;
  std::map<std::string, Hash128> hashes_;
  std::vector<TensorLayout> layouts_;
  std::vector<TensorPatch> sections_;
  VersionMakeStats stats_;
};

// Tensor `name` of shape `shape` at the first version of a view, from its f32 masters: on a fresh
// grid (Q8_0 scales, f16(amax / 127) per group) or in the bf16 / f32 carrier — the bits of
// Int8Quantizer's first quantize (tested). Throws kInvalidArgument for a non-finite value.
StateTensor fresh_view_tensor(const std::string& name, const Shape& shape, const float* master);

}  // namespace stoa::pulse
