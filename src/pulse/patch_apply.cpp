// Verified, all-or-nothing patch application. The scatter writes in place and records the old
// bytes in an undo log (the log is as small as the patch, whereas staging copies of the touched
// tensors would copy ~the whole model, since a 0.5% patch touches nearly every tensor); a hash
// mismatch rolls the log back, so the caller's state is exactly as it was.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "pulse/patch.h"

namespace stoa::pulse {

static void check_sorted_below(const std::vector<uint64_t>& v, uint64_t limit,
                               const std::string& tensor, const char* what) {
  for (size_t i = 0; i < v.size(); ++i) {
    STOA_CHECK(v[i] < limit, ErrorKind::kBadFormat, "patch: tensor '", tensor, "' ", what, " ", i,
               " (", v[i], ") is out of range (", limit, ")");
    STOA_CHECK(i == 0 || v[i] > v[i - 1], ErrorKind::kBadFormat, "patch: tensor '", tensor, "' ",
               what, "s are not strictly increasing at ", i);
  }
}

// The checks of validate_patch; `layout_of(name)` is the held tensor's layout or nullptr.
template <typename LayoutOf>
static void validate_against(uint64_t version, const Hash128& fingerprint, LayoutOf layout_of,
                             const Patch& patch) {
  STOA_CHECK(patch.fingerprint == fingerprint, ErrorKind::kIntegrity, "patch ", patch.from_version,
             "->", patch.to_version, " is for another model (fingerprint ", patch.fingerprint.hex(),
             ", state has ", fingerprint.hex(), ")");
  STOA_CHECK(patch.from_version == version, ErrorKind::kIntegrity, "patch ", patch.from_version,
             "->", patch.to_version, " does not apply to version ", version);
  STOA_CHECK(patch.to_version > patch.from_version, ErrorKind::kBadFormat, "patch ",
             patch.from_version, "->", patch.to_version, " does not move forward");
  for (size_t i = 0; i < patch.tensors.size(); ++i) {
    const TensorPatch& tp = patch.tensors[i];
    STOA_CHECK(i == 0 || tp.name > patch.tensors[i - 1].name, ErrorKind::kBadFormat,
               "patch: tensors are not sorted by name at '", tp.name, "'");
    const TensorLayout* t = layout_of(tp.name);
    STOA_CHECK(t != nullptr, ErrorKind::kBadFormat, "patch names tensor '", tp.name,
               "' which the model does not have");
    STOA_CHECK(t->kind == tp.kind && t->shape == tp.shape, ErrorKind::kBadFormat, "patch: tensor '",
               tp.name, "' is ", tensor_kind_name(tp.kind), " ", shape_string(tp.shape),
               " in the patch but ", tensor_kind_name(t->kind), " ", shape_string(t->shape),
               " in the model");
    const auto numel = static_cast<uint64_t>(shape_numel(t->shape));
    check_sorted_below(tp.positions, numel, tp.name, "position");
    if (tp.kind == TensorKind::kInt8) {
      STOA_CHECK(tp.i8.size() == tp.positions.size() && tp.bf16.empty() && tp.f32.empty(),
                 ErrorKind::kBadFormat, "patch: tensor '", tp.name, "' has ", tp.i8.size(),
                 " int8 values for ", tp.positions.size(), " positions");
      check_sorted_below(tp.groups, numel / kInt8GroupSize, tp.name, "group");
      STOA_CHECK(tp.group_scales.size() == tp.groups.size() &&
                     tp.group_values.size() == tp.groups.size() * kInt8GroupSize,
                 ErrorKind::kBadFormat, "patch: tensor '", tp.name,
                 "' has inconsistent rescaled-group sections");
    } else {
      const size_t values = tp.kind == TensorKind::kBf16 ? tp.bf16.size() : tp.f32.size();
      const size_t other = tp.kind == TensorKind::kBf16 ? tp.f32.size() : tp.bf16.size();
      STOA_CHECK(values == tp.positions.size() && other == 0 && tp.i8.empty() &&
                     tp.groups.empty() && tp.group_scales.empty() && tp.group_values.empty(),
                 ErrorKind::kBadFormat, "patch: ", tensor_kind_name(tp.kind), " tensor '", tp.name,
                 "' has ", values, " values for ", tp.positions.size(),
                 " positions (and must have no groups)");
    }
  }
}

void validate_patch(const Int8State& state, const Patch& patch) {
  TensorLayout scratch;
  validate_against(
      state.version(), state.fingerprint(),
      [&](const std::string& name) -> const TensorLayout* {
        if (!state.has(name)) return nullptr;
        const StateTensor& t = state.at(name);
        scratch = {name, t.kind, t.shape};
        return &scratch;
      },
      patch);
}

void validate_patch(const HeldLayout& held, const Patch& patch) {
  validate_against(
      held.version, held.fingerprint,
      [&](const std::string& name) -> const TensorLayout* {
        auto it = held.tensors.find(name);
        return it == held.tensors.end() ? nullptr : &it->second;
      },
      patch);
}

namespace {

// What one tensor looked like before the scatter, enough to restore it byte for byte.
struct Undo {
  std::string name;
  std::vector<int8_t> i8;
  std::vector<uint16_t> bf16;
  std::vector<uint32_t> f32;
  std::vector<uint16_t> group_scales;
  std::vector<int8_t> group_values;
  Hash128 old_hash;
};

// Point scatter for the bf16 and f32 kinds: the old values go to `old` first (allocation before
// the first write).
template <typename T>
void scatter_points(std::vector<T>& dst, const std::vector<uint64_t>& pos,
                    const std::vector<T>& values, std::vector<T>& old) {
  old.resize(pos.size());
  for (size_t i = 0; i < pos.size(); ++i) {
    old[i] = dst[pos[i]];
    dst[pos[i]] = values[i];
  }
}

void scatter(StateTensor& t, const TensorPatch& tp, Undo& undo) {
  size_t n = tp.positions.size();
  const uint64_t* pos = tp.positions.data();
  if (t.kind == TensorKind::kBf16) return scatter_points(t.bf16, tp.positions, tp.bf16, undo.bf16);
  if (t.kind == TensorKind::kF32) return scatter_points(t.f32, tp.positions, tp.f32, undo.f32);
  int8_t* values = t.q.values.data();
  size_t groups = tp.groups.size();
  // Every allocation happens before the first write, so a failed allocation leaves t untouched.
  undo.group_scales.resize(groups);
  undo.group_values.resize(groups * kInt8GroupSize);
  undo.i8.resize(n);
  for (size_t k = 0; k < groups; ++k) {
    size_t g = static_cast<size_t>(tp.groups[k]);
    undo.group_scales[k] = t.q.scales[g];
    t.q.scales[g] = tp.group_scales[k];
    std::memcpy(undo.group_values.data() + k * kInt8GroupSize, values + g * kInt8GroupSize,
                kInt8GroupSize);
    std::memcpy(values + g * kInt8GroupSize, tp.group_values.data() + k * kInt8GroupSize,
                kInt8GroupSize);
  }
  const int8_t* src = tp.i8.data();
  int8_t* old = undo.i8.data();
  for (size_t i = 0; i < n; ++i) {
    old[i] = values[pos[i]];
    values[pos[i]] = src[i];
  }
}

// Reverse of scatter: points first (they were written last), then groups.
void unscatter(StateTensor& t, const TensorPatch& tp, const Undo& undo) {
  size_t n = tp.positions.size();
  if (t.kind == TensorKind::kBf16) {
    for (size_t i = 0; i < n; ++i) t.bf16[tp.positions[i]] = undo.bf16[i];
    return;
  }
  if (t.kind == TensorKind::kF32) {
    for (size_t i = 0; i < n; ++i) t.f32[tp.positions[i]] = undo.f32[i];
    return;
  }
  int8_t* values = t.q.values.data();
  for (size_t i = 0; i < n; ++i) values[tp.positions[i]] = undo.i8[i];
  for (size_t k = 0; k < tp.groups.size(); ++k) {
    size_t g = static_cast<size_t>(tp.groups[k]);
    t.q.scales[g] = undo.group_scales[k];
    std::memcpy(values + g * kInt8GroupSize, undo.group_values.data() + k * kInt8GroupSize,
                kInt8GroupSize);
  }
}

}  // namespace

void apply_patch(Int8State& state, const Patch& patch) {
  validate_patch(state, patch);
  StateEditor editor(state);
  std::vector<Undo> undo;
  undo.reserve(patch.tensors.size());  // push_back below then never reallocates or throws
  std::map<std::string, Hash128> hashes;
  for (const auto& [name, t] : state.tensors()) hashes.emplace(name, state.tensor_hash(name));

  auto roll_back = [&] {
    for (size_t i = undo.size(); i-- > 0;) {
      const TensorPatch& tp = patch.tensors[i];
      unscatter(editor.tensor(tp.name), tp, undo[i]);
      editor.set_hash(tp.name, undo[i].old_hash);
    }
  };

  for (const TensorPatch& tp : patch.tensors) {
    StateTensor& t = editor.tensor(tp.name);
    Undo u{tp.name, {}, {}, {}, {}, {}, state.tensor_hash(tp.name)};
    try {
      scatter(t, tp, u);  // throws (bad_alloc) only before its first write
      undo.push_back(std::move(u));
    } catch (...) {
      roll_back();
      throw;
    }
    Hash128 got = t.compute_hash();
    if (!(got == tp.result_hash)) {
      roll_back();
      fail(ErrorKind::kIntegrity, "patch ", patch.from_version, "->", patch.to_version,
           ": tensor '", tp.name, "' hashes to ", got.hex(), " after applying, the patch says ",
           tp.result_hash.hex(), "; refused, weights left at version ", state.version());
    }
    hashes[tp.name] = got;
  }
  Hash128 whole = combine_state_hash(hashes);
  if (!(whole == patch.result_state_hash)) {
    roll_back();
    fail(ErrorKind::kIntegrity, "patch ", patch.from_version, "->", patch.to_version,
         ": the resulting state hashes to ", whole.hex(), ", the patch says ",
         patch.result_state_hash.hex(), "; refused, weights left at version ", state.version());
  }
  for (const TensorPatch& tp : patch.tensors) editor.set_hash(tp.name, hashes[tp.name]);
  state.set_version(patch.to_version);
}

}  // namespace stoa::pulse
