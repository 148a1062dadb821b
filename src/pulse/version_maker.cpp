#include "pulse/version_maker.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"

namespace stoa::pulse {

namespace {

// True when every value is finite (integer compare on the bit patterns: vectorises).
bool all_finite(const float* x, size_t n) {
  uint32_t worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t b = f32_bits(x[i]) & 0x7fffffffu;
    worst = b > worst ? b : worst;
  }
  return worst < 0x7f800000u;
}

// Appends to `section` the positions where `view` differs from `fresh` and writes them into
// `view`.
template <typename T>
void diff_into(std::vector<T>& view, const T* fresh, std::vector<uint64_t>* positions,
               std::vector<T>* values) {
  for (size_t i = 0; i < view.size(); ++i) {
    if (view[i] == fresh[i]) continue;
    positions->push_back(i);
    values->push_back(fresh[i]);
    view[i] = fresh[i];
  }
}

}  // namespace

VersionMaker::VersionMaker(uint64_t from_version, uint64_t to_version, const Hash128& config_hash,
                           RescaleRule rule)
    : from_(from_version), to_(to_version), config_hash_(config_hash), rule_(rule) {
  STOA_CHECK(to_version > from_version, ErrorKind::kInvalidArgument, "version maker: version ",
             to_version, " does not follow ", from_version);
}

TensorPatch VersionMaker::int8_section(StateTensor& view, const float* master) {
  TensorPatch tp;
  Int8Matrix& q = view.q;
  const size_t groups = q.scales.size();
  int8_t fresh_values[kInt8GroupSize];
  for (size_t g = 0; g < groups; ++g) {
    const float* x = master + g * kInt8GroupSize;
    int8_t* v = q.values.data() + g * kInt8GroupSize;
    uint16_t& scale = q.scales[g];
    const float amax = group_amax(x);
    const uint16_t fresh_scale = f32_to_f16(amax / 127.0f);
    if (should_rescale(amax, scale, fresh_scale, rule_)) {
      // The group travels whole (make_patch emits no point inside a rescaled group).
      scale = fresh_scale;
      quantize_group_exact(x, scale, v);
      tp.groups.push_back(g);
      tp.group_scales.push_back(scale);
      tp.group_values.insert(tp.group_values.end(), v, v + kInt8GroupSize);
      continue;
    }
    quantize_group_exact(x, scale, fresh_values);
    if (std::memcmp(fresh_values, v, kInt8GroupSize) == 0) continue;  // the common case
    for (int64_t i = 0; i < kInt8GroupSize; ++i) {
      if (fresh_values[i] == v[i]) continue;
      tp.positions.push_back(g * kInt8GroupSize + static_cast<uint64_t>(i));
      tp.i8.push_back(fresh_values[i]);
      v[i] = fresh_values[i];
    }
  }
  return tp;
}

Hash128 VersionMaker::tensor(const std::string& name, StateTensor& view, const Hash128& view_hash,
                             const float* master) {
  STOA_CHECK(!hashes_.count(name), ErrorKind::kInvalidArgument, "version maker: tensor '", name,
             "' given twice");
  const size_t n = static_cast<size_t>(view.numel());
  STOA_CHECK(all_finite(master, n), ErrorKind::kInvalidArgument, "version maker: tensor '", name,
             "' has a non-finite master value");
  TensorPatch tp;
  if (view.kind == TensorKind::kInt8) {
    tp = int8_section(view, master);
    stats_.rescaled_groups += static_cast<int64_t>(tp.groups.size());
  } else if (view.kind == TensorKind::kBf16) {
    std::vector<uint16_t> fresh(n);
    for (size_t i = 0; i < n; ++i) fresh[i] = f32_to_bf16(master[i]);
    diff_into(view.bf16, fresh.data(), &tp.positions, &tp.bf16);
  } else {
    // The router and expert_bias: the master's f32 bits exactly.
    const uint32_t* bits = reinterpret_cast<const uint32_t*>(master);
    diff_into(view.f32, bits, &tp.positions, &tp.f32);
  }
  stats_.values += static_cast<int64_t>(n);
  stats_.changed += static_cast<int64_t>(tp.values_written());
  layouts_.push_back({name, view.kind, view.shape});
  if (tp.values_written() == 0) {
    hashes_[name] = view_hash;
    return view_hash;
  }
  tp.name = name;
  tp.kind = view.kind;
  tp.shape = view.shape;
  tp.result_hash = view.compute_hash();
  hashes_[name] = tp.result_hash;
  const Hash128 result = tp.result_hash;
  sections_.push_back(std::move(tp));
  return result;
}

Patch VersionMaker::finish() {
  std::sort(layouts_.begin(), layouts_.end(),
            [](const TensorLayout& a, const TensorLayout& b) { return a.name < b.name; });
  std::sort(sections_.begin(), sections_.end(),
            [](const TensorPatch& a, const TensorPatch& b) { return a.name < b.name; });
  Patch patch;
  patch.from_version = from_;
  patch.to_version = to_;
  patch.fingerprint = model_fingerprint(config_hash_, layouts_);
  patch.result_state_hash = combine_state_hash(hashes_);
  patch.tensors = std::move(sections_);
  sections_.clear();
  return patch;
}

StateTensor fresh_view_tensor(const std::string& name, const Shape& shape, const float* master) {
  StateTensor t;
  t.kind = tensor_kind_for(name, shape);
  t.shape = shape;
  const size_t n = static_cast<size_t>(shape_numel(shape));
  STOA_CHECK(all_finite(master, n), ErrorKind::kInvalidArgument, "version maker: tensor '", name,
             "' has a non-finite master value");
  if (t.kind == TensorKind::kInt8) {
    Int8Matrix& q = t.q;
    q.rows = shape[0];
    q.cols = shape[1];
    q.values.resize(n);
    q.scales.resize(n / kInt8GroupSize);
    for (size_t g = 0; g < q.scales.size(); ++g) {
      const float* x = master + g * kInt8GroupSize;
      q.scales[g] = f32_to_f16(group_amax(x) / 127.0f);
      quantize_group_exact(x, q.scales[g], q.values.data() + g * kInt8GroupSize);
    }
  } else if (t.kind == TensorKind::kBf16) {
    t.bf16.resize(n);
    for (size_t i = 0; i < n; ++i) t.bf16[i] = f32_to_bf16(master[i]);
  } else {
    t.f32.resize(n);
    if (n) std::memcpy(t.f32.data(), master, n * sizeof(float));
  }
  return t;
}

}  // namespace stoa::pulse
