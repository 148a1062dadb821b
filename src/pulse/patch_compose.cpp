// Composition of consecutive patches (catch-up: a hub can hand a worker that is k versions behind
// one patch instead of k). Works on sorted lists by merging, O(size of the patches).
#include <algorithm>

#include "core/error.h"
#include "pulse/patch.h"

namespace stoa::pulse {

namespace {

// Folds a patch's points that lie inside its own re-scaled groups into those groups (points
// apply after groups, so the point value is the final one). Afterwards points and groups are
// disjoint.
TensorPatch fold_points_into_groups(const TensorPatch& in) {
  TensorPatch t = in;
  if (t.groups.empty() || t.positions.empty()) return t;
  std::vector<uint64_t> positions;
  std::vector<int8_t> values;
  positions.reserve(t.positions.size());
  values.reserve(t.positions.size());
  size_t gi = 0;
  for (size_t i = 0; i < t.positions.size(); ++i) {
    uint64_t p = t.positions[i];
    uint64_t g = p / kInt8GroupSize;
    while (gi < t.groups.size() && t.groups[gi] < g) ++gi;
    if (gi < t.groups.size() && t.groups[gi] == g) {
      t.group_values[gi * kInt8GroupSize + p % kInt8GroupSize] = t.i8[i];
    } else {
      positions.push_back(p);
      values.push_back(t.i8[i]);
    }
  }
  t.positions = std::move(positions);
  t.i8 = std::move(values);
  return t;
}

template <typename T>
void merge_points(const std::vector<uint64_t>& pa, const std::vector<T>& va,
                  const std::vector<uint64_t>& pb, const std::vector<T>& vb,
                  std::vector<uint64_t>* pos, std::vector<T>* val, std::vector<bool>* from_b) {
  size_t i = 0, j = 0;
  pos->reserve(pa.size() + pb.size());
  val->reserve(pa.size() + pb.size());
  while (i < pa.size() || j < pb.size()) {
    bool take_b = i == pa.size() || (j < pb.size() && pb[j] <= pa[i]);
    if (take_b) {
      if (i < pa.size() && pa[i] == pb[j]) ++i;  // the later value wins
      pos->push_back(pb[j]);
      val->push_back(vb[j]);
      if (from_b) from_b->push_back(true);
      ++j;
    } else {
      pos->push_back(pa[i]);
      val->push_back(va[i]);
      if (from_b) from_b->push_back(false);
      ++i;
    }
  }
}

TensorPatch compose_tensor(const TensorPatch& a_in, const TensorPatch& b_in) {
  STOA_CHECK(a_in.kind == b_in.kind && a_in.shape == b_in.shape, ErrorKind::kInvalidArgument,
             "compose: tensor '", a_in.name, "' differs in kind or shape between the patches");
  TensorPatch r;
  r.name = b_in.name;
  r.kind = b_in.kind;
  r.shape = b_in.shape;
  r.result_hash = b_in.result_hash;
  if (r.kind == TensorKind::kBf16) {
    merge_points(a_in.positions, a_in.bf16, b_in.positions, b_in.bf16, &r.positions, &r.bf16,
                 nullptr);
    return r;
  }
  if (r.kind == TensorKind::kF32) {
    merge_points(a_in.positions, a_in.f32, b_in.positions, b_in.f32, &r.positions, &r.f32, nullptr);
    return r;
  }
  TensorPatch a = fold_points_into_groups(a_in);
  TensorPatch b = fold_points_into_groups(b_in);
  // Groups: b's replace a's; a's others survive.
  std::vector<bool> group_from_b;
  {
    size_t i = 0, j = 0;
    while (i < a.groups.size() || j < b.groups.size()) {
      bool take_b = i == a.groups.size() || (j < b.groups.size() && b.groups[j] <= a.groups[i]);
      const TensorPatch& src = take_b ? b : a;
      size_t k = take_b ? j : i;
      if (take_b && i < a.groups.size() && a.groups[i] == b.groups[j]) ++i;
      r.groups.push_back(src.groups[k]);
      r.group_scales.push_back(src.group_scales[k]);
      r.group_values.insert(r.group_values.end(), src.group_values.begin() + k * kInt8GroupSize,
                            src.group_values.begin() + (k + 1) * kInt8GroupSize);
      group_from_b.push_back(take_b);
      (take_b ? j : i) += 1;
    }
  }
  std::vector<uint64_t> pos;
  std::vector<int8_t> val;
  std::vector<bool> from_b;
  merge_points(a.positions, a.i8, b.positions, b.i8, &pos, &val, &from_b);
  r.positions.reserve(pos.size());
  r.i8.reserve(pos.size());
  size_t gi = 0;
  for (size_t i = 0; i < pos.size(); ++i) {
    uint64_t g = pos[i] / kInt8GroupSize;
    while (gi < r.groups.size() && r.groups[gi] < g) ++gi;
    if (gi < r.groups.size() && r.groups[gi] == g) {
      // Inside a result group. Points of a here lie in a group of b (a is folded): b's group
      // overrides them. Points of b lie in a group of a (b is folded): they write into it.
      if (from_b[i] && !group_from_b[gi])
        r.group_values[gi * kInt8GroupSize + pos[i] % kInt8GroupSize] = val[i];
      continue;
    }
    r.positions.push_back(pos[i]);
    r.i8.push_back(val[i]);
  }
  return r;
}

}  // namespace

Patch compose_patches(const Patch& a, const Patch& b) {
  STOA_CHECK(a.fingerprint == b.fingerprint, ErrorKind::kInvalidArgument, "compose: patches ",
             a.from_version, "->", a.to_version, " and ", b.from_version, "->", b.to_version,
             " are for different models");
  STOA_CHECK(a.to_version == b.from_version, ErrorKind::kInvalidArgument, "compose: patch ",
             a.from_version, "->", a.to_version, " is not followed by ", b.from_version, "->",
             b.to_version);
  Patch r;
  r.from_version = a.from_version;
  r.to_version = b.to_version;
  r.fingerprint = b.fingerprint;
  r.result_state_hash = b.result_state_hash;
  size_t i = 0, j = 0;
  while (i < a.tensors.size() || j < b.tensors.size()) {
    if (j == b.tensors.size() || (i < a.tensors.size() && a.tensors[i].name < b.tensors[j].name)) {
      r.tensors.push_back(a.tensors[i++]);
    } else if (i == a.tensors.size() || b.tensors[j].name < a.tensors[i].name) {
      r.tensors.push_back(b.tensors[j++]);
    } else {
      r.tensors.push_back(compose_tensor(a.tensors[i++], b.tensors[j++]));
    }
  }
  return r;
}

Patch compose_chain(const std::vector<Patch>& patches) {
  STOA_CHECK(!patches.empty(), ErrorKind::kInvalidArgument, "compose: no patches");
  Patch r = patches.front();
  for (size_t i = 1; i < patches.size(); ++i) r = compose_patches(r, patches[i]);
  return r;
}

}  // namespace stoa::pulse
