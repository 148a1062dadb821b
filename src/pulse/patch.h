// A PULSE patch in memory: for every tensor that changed between two versions of the int8 view,
// the positions that changed and their NEW values (never arithmetic deltas, so the receiver's
// result cannot drift: it is a scatter-assign), plus the int8 groups whose scale was re-chosen,
// carried whole (new f16 scale + 32 values), and the hashes the result must have.
//
// Apply order inside one tensor: rescaled groups first, then point values (so a point inside a
// rescaled group wins). make_patch never emits a point inside a rescaled group; compose folds
// such points into the group.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/hash.h"
#include "pulse/int8_state.h"

namespace stoa::pulse {

struct TensorPatch {
  std::string name;
  TensorKind kind = TensorKind::kInt8;
  Shape shape;
  Hash128 result_hash;                 // the tensor's hash after applying
  std::vector<uint64_t> positions;     // flat element indices, strictly increasing
  std::vector<int8_t> i8;              // kInt8: the new value at each position
  std::vector<uint16_t> bf16;          // kBf16: the new value (bits) at each position
  std::vector<uint32_t> f32;           // kF32: the new value (bits) at each position
  std::vector<uint64_t> groups;        // kInt8: re-scaled group indices, strictly increasing
  std::vector<uint16_t> group_scales;  // f16 bits, one per group
  std::vector<int8_t> group_values;    // 32 per group

  size_t points() const { return positions.size(); }
  // Values this patch writes: points + 32 per rescaled group.
  uint64_t values_written() const { return positions.size() + groups.size() * kInt8GroupSize; }
};

struct Patch {
  uint64_t from_version = 0;
  uint64_t to_version = 0;
  Hash128 fingerprint;
  Hash128 result_state_hash;
  std::vector<TensorPatch> tensors;  // touched tensors only, sorted by name

  uint64_t values_written() const;
};

// The patch that turns `from` into `to` (same fingerprint, else kInvalidArgument).
Patch make_patch(const Int8State& from, const Int8State& to);

// Checks the patch's own structure against the state it is for: versions, fingerprint, tensor
// names, kinds and shapes, sorted in-bounds positions and groups, value counts. Throws kBadFormat
// (kIntegrity for a fingerprint or version mismatch) naming the tensor; touches nothing.
void validate_patch(const Int8State& state, const Patch& patch);
// The same checks for a receiver that holds its weights in another layout (a worker whose
// engine is its one copy): the version, fingerprint and every tensor's kind and shape.
struct HeldLayout {
  uint64_t version = 0;
  Hash128 fingerprint;
  std::map<std::string, TensorLayout> tensors;
};
void validate_patch(const HeldLayout& held, const Patch& patch);

// Applies `patch` to `state` all or nothing: validates, scatter-assigns with an undo log, checks
// every touched tensor's hash and the whole-state hash, and on any mismatch restores every byte
// and throws kIntegrity naming the tensor. On success the state is at patch.to_version.
void apply_patch(Int8State& state, const Patch& patch);

// One patch equivalent to applying a then b (a.to_version == b.from_version, same fingerprint):
// the later value wins; a group re-scaled in b replaces a's points and group there; b's points
// inside a group re-scaled by a are folded into that group.
Patch compose_patches(const Patch& a, const Patch& b);
// Folds k >= 1 consecutive patches into one (left to right).
Patch compose_chain(const std::vector<Patch>& patches);

}  // namespace stoa::pulse
