#include "pulse/patch.h"

#include <cstring>

#include "core/error.h"

namespace stoa::pulse {

uint64_t Patch::values_written() const {
  uint64_t n = 0;
  for (const auto& t : tensors) n += t.values_written();
  return n;
}

// Appends the positions in [begin, end) where a and b differ. Compares 8 bytes at a time: at
// ~0.5% changed values most words are equal, so the scan runs at memory speed.
template <typename T>
static void diff_range(const T* a, const T* b, uint64_t begin, uint64_t end,
                       std::vector<uint64_t>* positions, std::vector<T>* values) {
  constexpr uint64_t kPerWord = 8 / sizeof(T);
  uint64_t i = begin;
  while (i < end) {
    if (i % kPerWord == 0 && i + kPerWord <= end) {
      uint64_t wa, wb;
      std::memcpy(&wa, a + i, 8);
      std::memcpy(&wb, b + i, 8);
      if (wa == wb) {
        i += kPerWord;
        continue;
      }
      for (uint64_t k = i; k < i + kPerWord; ++k) {
        if (a[k] != b[k]) {
          positions->push_back(k);
          values->push_back(b[k]);
        }
      }
      i += kPerWord;
      continue;
    }
    if (a[i] != b[i]) {
      positions->push_back(i);
      values->push_back(b[i]);
    }
    ++i;
  }
}

static TensorPatch diff_tensor(const std::string& name, const StateTensor& a,
                               const StateTensor& b) {
  TensorPatch tp;
  tp.name = name;
  tp.kind = b.kind;
  tp.shape = b.shape;
  if (b.kind == TensorKind::kBf16) {
    diff_range(a.bf16.data(), b.bf16.data(), 0, b.bf16.size(), &tp.positions, &tp.bf16);
    return tp;
  }
  if (b.kind == TensorKind::kF32) {
    diff_range(a.f32.data(), b.f32.data(), 0, b.f32.size(), &tp.positions, &tp.f32);
    return tp;
  }
  const int8_t* va = a.q.values.data();
  const int8_t* vb = b.q.values.data();
  size_t groups = b.q.scales.size();
  // Runs of groups with unchanged scales are diffed as one range.
  uint64_t run_begin = 0;
  for (size_t g = 0; g <= groups; ++g) {
    bool rescaled = g < groups && a.q.scales[g] != b.q.scales[g];
    if (g == groups || rescaled) {
      diff_range(va, vb, run_begin, static_cast<uint64_t>(g) * kInt8GroupSize, &tp.positions,
                 &tp.i8);
      run_begin = (static_cast<uint64_t>(g) + 1) * kInt8GroupSize;
    }
    if (rescaled) {
      tp.groups.push_back(g);
      tp.group_scales.push_back(b.q.scales[g]);
      tp.group_values.insert(tp.group_values.end(), vb + g * kInt8GroupSize,
                             vb + (g + 1) * kInt8GroupSize);
    }
  }
  return tp;
}

Patch make_patch(const Int8State& from, const Int8State& to) {
  STOA_CHECK(from.fingerprint() == to.fingerprint(), ErrorKind::kInvalidArgument,
             "make_patch: versions ", from.version(), " and ", to.version(),
             " are views of different models (fingerprints differ)");
  Patch patch;
  patch.from_version = from.version();
  patch.to_version = to.version();
  patch.fingerprint = to.fingerprint();
  patch.result_state_hash = to.state_hash();
  for (const auto& [name, b] : to.tensors()) {
    if (from.tensor_hash(name) == to.tensor_hash(name)) continue;
    TensorPatch tp = diff_tensor(name, from.at(name), b);
    tp.result_hash = to.tensor_hash(name);
    patch.tensors.push_back(std::move(tp));
  }
  return patch;
}

}  // namespace stoa::pulse
