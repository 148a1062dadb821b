#include "roles/worker/engine_update_patch.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "core/dtype.h"
#include "core/error.h"

namespace stoa::worker {
namespace {

using pulse::StateTensor;
using pulse::TensorKind;
using pulse::TensorPatch;

// The f32 storage of a tensor the engine computes in f32 (a vector or an f32 Linear).
const Tensor& f32_storage(const engine::EngineWeights& weights, const std::string& name) {
  if (auto it = weights.vectors().find(name); it != weights.vectors().end()) return it->second;
  return weights.linear(name).f32();
}

Tensor widened(const StateTensor& t) {
  Tensor out(DType::kF32, t.shape);
  if (t.kind == TensorKind::kBf16)
    convert_bf16_to_f32(t.bf16.data(), out.as<float>(), t.bf16.size());
  else if (!t.f32.empty())  // f32 travels as its bits: copied, not rounded
    std::memcpy(out.as<float>(), t.f32.data(), t.f32.size() * sizeof(float));
  return out;
}

// What one tensor patch overwrote, enough to restore it byte for byte.
struct Undo {
  const TensorPatch* patch = nullptr;
  std::vector<uint16_t> group_scales;
  std::vector<int8_t> group_values;  // 32 per group
  std::vector<int8_t> i8;
  std::vector<uint32_t> bits;  // f32 storage of a bf16 or f32 tensor
};

void scatter_int8(engine::Linear& l, const TensorPatch& tp, Undo& undo) {
  const size_t groups = tp.groups.size(), points = tp.positions.size();
  // Every allocation before the first write: a failed one leaves the tensor untouched.
  undo.group_scales.resize(groups);
  undo.group_values.resize(groups * kInt8GroupSize);
  undo.i8.resize(points);
  for (size_t k = 0; k < groups; ++k) {
    const auto g = static_cast<int64_t>(tp.groups[k]);
    undo.group_scales[k] = l.int8_scale(g);
    l.set_int8_scale(g, tp.group_scales[k]);
    for (int64_t j = 0; j < kInt8GroupSize; ++j) {
      const int64_t at = g * kInt8GroupSize + j;
      undo.group_values[k * kInt8GroupSize + static_cast<size_t>(j)] = l.int8_value(at);
      l.set_int8_value(at, tp.group_values[k * kInt8GroupSize + static_cast<size_t>(j)]);
    }
  }
  l.exchange_int8_values(tp.positions, tp.i8.data(), undo.i8.data());
}

void unscatter_int8(engine::Linear& l, const Undo& undo) {
  const TensorPatch& tp = *undo.patch;
  // A validated patch's positions are distinct: restoring them in any order is exact.
  l.exchange_int8_values(tp.positions, undo.i8.data(), nullptr);
  for (size_t k = tp.groups.size(); k-- > 0;) {
    const auto g = static_cast<int64_t>(tp.groups[k]);
    l.set_int8_scale(g, undo.group_scales[k]);
    for (int64_t j = 0; j < kInt8GroupSize; ++j)
      l.set_int8_value(g * kInt8GroupSize + j,
                       undo.group_values[k * kInt8GroupSize + static_cast<size_t>(j)]);
  }
}

void scatter_wide(Tensor& t, const TensorPatch& tp, Undo& undo) {
  const size_t points = tp.positions.size();
  undo.bits.resize(points);
  auto* dst = reinterpret_cast<uint32_t*>(t.as<float>());
  for (size_t i = 0; i < points; ++i) {
    // bf16 widens to f32 by its bits (exact, as the anchor load did); f32 travels as its bits.
    const uint32_t bits =
        tp.kind == TensorKind::kBf16 ? static_cast<uint32_t>(tp.bf16[i]) << 16 : tp.f32[i];
    undo.bits[i] = dst[tp.positions[i]];
    dst[tp.positions[i]] = bits;
  }
}

void unscatter_wide(Tensor& t, const Undo& undo) {
  auto* dst = reinterpret_cast<uint32_t*>(t.as<float>());
  const TensorPatch& tp = *undo.patch;
  for (size_t i = tp.positions.size(); i-- > 0;) dst[tp.positions[i]] = undo.bits[i];
}

// Canonical section header of StateHasher::add (core/hash.cpp): u64 name length, name, u8 dtype,
// u64 rank, i64 dims — then the data, which may follow in pieces (xxh3 streams).
void add_section_header(StateHasher& h, std::string_view name, DType dtype, const Shape& shape) {
  const uint64_t length = name.size();
  h.add_bytes(&length, sizeof(length));
  h.add_bytes(name.data(), name.size());
  const auto code = static_cast<uint8_t>(dtype);
  h.add_bytes(&code, 1);
  const uint64_t rank = shape.size();
  h.add_bytes(&rank, sizeof(rank));
  for (int64_t d : shape) h.add_bytes(&d, sizeof(d));
}

// An int8 tensor's hash as it will be after `patches` (in order), read from the engine in
// chunks of rows: no copy of the tensor, one L2-sized buffer and its f16 scales (1/16 of it).
// Both buffers are the calling thread's, kept from tensor to tensor (a patch touches nearly
// every tensor: fresh ones would be allocated and page-faulted in for each).
Hash128 hash_patched_int8(const engine::Linear& l, std::span<const TensorPatch* const> patches) {
  const int64_t rows = l.rows(), cols = l.cols(), per_row = cols / kInt8GroupSize;
  thread_local std::vector<uint16_t> scale_buffer;
  thread_local std::vector<int8_t> value_buffer;
  scale_buffer.resize(std::max(scale_buffer.size(), static_cast<size_t>(rows * per_row)));
  const std::span<uint16_t> scales(scale_buffer.data(), static_cast<size_t>(rows * per_row));
  // ~256 KB of rows, whole 16-row panels (engine/linear.h: a packed Linear unpacks those fastest).
  const int64_t chunk = std::max<int64_t>(16, (int64_t{1} << 18) / cols / 16 * 16);
  value_buffer.resize(
      std::max(value_buffer.size(), static_cast<size_t>(std::min(rows, chunk) * cols)));
  int8_t* const values = value_buffer.data();
  std::vector<std::pair<size_t, size_t>> at(patches.size());  // next group, next point
  StateHasher h;
  add_section_header(h, "values", DType::kI8, {rows, cols});
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t r1 = std::min(rows, r0 + chunk);
    l.int8_rows(r0, r1, values, scales.data() + r0 * per_row);
    const auto lo = static_cast<uint64_t>(r0 * cols), hi = static_cast<uint64_t>(r1 * cols);
    for (size_t p = 0; p < patches.size(); ++p) {
      const TensorPatch& tp = *patches[p];
      auto& [g, i] = at[p];
      for (; g < tp.groups.size() && tp.groups[g] * kInt8GroupSize < hi; ++g) {
        scales[tp.groups[g]] = tp.group_scales[g];
        std::memcpy(values + (tp.groups[g] * kInt8GroupSize - lo),
                    tp.group_values.data() + g * kInt8GroupSize, kInt8GroupSize);
      }
      for (; i < tp.positions.size() && tp.positions[i] < hi; ++i)
        values[tp.positions[i] - lo] = tp.i8[i];
    }
    h.add_bytes(values, static_cast<size_t>((r1 - r0) * cols));
  }
  add_section_header(h, "scales", DType::kF16, {rows, per_row});
  h.add_bytes(scales.data(), scales.size() * sizeof(uint16_t));
  return h.finish();
}

void check_numel(const std::string& name, int64_t held, const TensorPatch& tp) {
  STOA_CHECK(held == shape_numel(tp.shape), ErrorKind::kInvalidArgument, "patch of ", name, " is ",
             shape_string(tp.shape), ", the engine holds ", held, " values");
}

}  // namespace

std::vector<pulse::TensorLayout> engine_layouts(const engine::EngineWeights& weights) {
  std::vector<pulse::TensorLayout> out;
  for (const auto& [name, l] : weights.linears()) {
    const Shape shape{l.rows(), l.cols()};
    const TensorKind kind = pulse::tensor_kind_for(name, shape);
    STOA_CHECK(l.is_int8() == (kind == TensorKind::kInt8), ErrorKind::kInvalidArgument, "engine ",
               "tensor ", name, " is held ", l.is_int8() ? "int8" : "f32", ", PULSE carries it ",
               pulse::tensor_kind_name(kind));
    out.push_back({name, kind, shape});
  }
  for (const auto& [name, t] : weights.vectors()) {
    const TensorKind kind = pulse::tensor_kind_for(name, t.shape());
    STOA_CHECK(kind != TensorKind::kInt8, ErrorKind::kInvalidArgument, "engine tensor ", name,
               " is held f32, PULSE carries it int8");
    out.push_back({name, kind, t.shape()});
  }
  std::sort(out.begin(), out.end(), [](const pulse::TensorLayout& a, const pulse::TensorLayout& b) {
    return a.name < b.name;
  });
  return out;
}

StateTensor read_state_tensor(const engine::EngineWeights& weights,
                              const pulse::TensorLayout& layout) {
  StateTensor t;
  t.kind = layout.kind;
  t.shape = layout.shape;
  if (layout.kind == TensorKind::kInt8) {
    t.q = weights.linear(layout.name).int8();  // unpacked from the panels when packed
    return t;
  }
  const Tensor& f = f32_storage(weights, layout.name);
  STOA_CHECK(f.shape() == layout.shape, ErrorKind::kInvalidArgument, "engine tensor ", layout.name,
             " is ", shape_string(f.shape()), ", not ", shape_string(layout.shape));
  const auto n = static_cast<size_t>(f.numel());
  const auto* bits = reinterpret_cast<const uint32_t*>(f.as<float>());
  if (layout.kind == TensorKind::kF32) {
    t.f32.assign(bits, bits + n);
  } else {
    // Widened from bf16 by its bits: the high half is the bf16 value, exactly.
    t.bf16.resize(n);
    for (size_t i = 0; i < n; ++i) t.bf16[i] = static_cast<uint16_t>(bits[i] >> 16);
  }
  return t;
}

void overlay_patch(StateTensor& t, const TensorPatch& tp) {
  if (t.kind == TensorKind::kBf16) {
    for (size_t i = 0; i < tp.positions.size(); ++i) t.bf16[tp.positions[i]] = tp.bf16[i];
    return;
  }
  if (t.kind == TensorKind::kF32) {
    for (size_t i = 0; i < tp.positions.size(); ++i) t.f32[tp.positions[i]] = tp.f32[i];
    return;
  }
  int8_t* values = t.q.values.data();
  for (size_t k = 0; k < tp.groups.size(); ++k) {
    const auto g = static_cast<size_t>(tp.groups[k]);
    t.q.scales[g] = tp.group_scales[k];
    std::memcpy(values + g * kInt8GroupSize, tp.group_values.data() + k * kInt8GroupSize,
                kInt8GroupSize);
  }
  for (size_t i = 0; i < tp.positions.size(); ++i) values[tp.positions[i]] = tp.i8[i];
}

Hash128 hash_patched_tensor(const engine::EngineWeights& weights, const pulse::TensorLayout& layout,
                            std::span<const TensorPatch* const> patches) {
  if (layout.kind == TensorKind::kInt8)
    return hash_patched_int8(weights.linear(layout.name), patches);
  StateTensor t = read_state_tensor(weights, layout);
  for (const TensorPatch* tp : patches) overlay_patch(t, *tp);
  return t.compute_hash();
}

const TensorPatch* find_tensor_patch(const pulse::Patch& patch, const std::string& name) {
  auto it =
      std::lower_bound(patch.tensors.begin(), patch.tensors.end(), name,
                       [](const TensorPatch& tp, const std::string& n) { return tp.name < n; });
  return it != patch.tensors.end() && it->name == name ? &*it : nullptr;
}

pulse::Int8State read_state(const engine::EngineWeights& weights, const Hash128& config_hash,
                            uint64_t version) {
  pulse::Int8State state;
  for (const pulse::TensorLayout& layout : engine_layouts(weights))
    state.add(layout.name, read_state_tensor(weights, layout));
  state.set_config_hash(config_hash);
  state.set_version(version);
  return state;
}

void scatter_patches(engine::EngineWeights& weights, std::span<const pulse::Patch> patches) {
  size_t count = 0;
  for (const pulse::Patch& p : patches) count += p.tensors.size();
  std::vector<Undo> undo;
  undo.reserve(count);  // emplace_back below never reallocates
  auto roll_back = [&] {
    for (size_t i = undo.size(); i-- > 0;) {
      const TensorPatch& tp = *undo[i].patch;
      if (tp.kind == TensorKind::kInt8)
        unscatter_int8(weights.int8_linear_mutable(tp.name), undo[i]);
      else
        unscatter_wide(weights.f32_mutable(tp.name), undo[i]);
    }
  };
  try {
    for (const pulse::Patch& p : patches) {
      for (const TensorPatch& tp : p.tensors) {
        Undo u;
        u.patch = &tp;
        if (tp.kind == TensorKind::kInt8) {
          engine::Linear& l = weights.int8_linear_mutable(tp.name);
          check_numel(tp.name, l.rows() * l.cols(), tp);
          scatter_int8(l, tp, u);  // throws only before its first write
        } else {
          Tensor& t = weights.f32_mutable(tp.name);
          check_numel(tp.name, t.numel(), tp);
          scatter_wide(t, tp, u);
        }
        undo.push_back(std::move(u));
      }
    }
  } catch (...) {
    roll_back();
    throw;
  }
}

void write_state_tensor(engine::EngineWeights& weights, const std::string& name,
                        StateTensor tensor) {
  if (tensor.kind == TensorKind::kInt8)
    weights.set_int8(name, std::move(tensor.q));  // checks the shape
  else
    weights.set_f32(name, widened(tensor));
}

void add_state_tensor(engine::EngineWeights& weights, const std::string& name, StateTensor tensor) {
  if (tensor.kind == TensorKind::kInt8)
    weights.add_state_int8(name, std::move(tensor.q));
  else
    weights.add_state_f32(name, widened(tensor));
}

}  // namespace stoa::worker
