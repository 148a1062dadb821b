#include "pulse/quantizer.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/int8_grid.h"

namespace stoa::pulse {

bool is_int8_tensor(const std::string& name, const Shape& shape) {
  return tensor_kind_for(name, shape) == TensorKind::kInt8;
}

bool should_rescale(float amax, uint16_t frozen, uint16_t fresh, const RescaleRule& rule) {
  float s = f16_to_f32(frozen);
  if (s == 0.0f) return amax != 0.0f;  // an all-zero group that became non-zero
  if (std::round(amax / s) > 127.0f) return true;
  return f16_to_f32(fresh) < rule.shrink_below * s;
}

// The group's largest magnitude, or NaN when any value is not finite (a float max would
// silently drop a NaN, and the grid must never carry one). Works on the bit patterns: for
// non-negative floats integer order is float order, and inf/NaN are the patterns >= 0x7f800000;
// an integer max reduction also vectorises.
float group_amax(const float* g) {
  int32_t m = 0;
  for (int64_t i = 0; i < kInt8GroupSize; ++i) {
    int32_t b = static_cast<int32_t>(f32_bits(g[i]) & 0x7fffffffu);
    m = b > m ? b : m;
  }
  if (m >= 0x7f800000) return std::numeric_limits<float>::quiet_NaN();
  return f32_from_bits(static_cast<uint32_t>(m));
}

void quantize_group_exact(const float* x, uint16_t scale_bits, int8_t* out) {
  float s = f16_to_f32(scale_bits);
  if (s == 0.0f || !std::isfinite(s)) {
    int8_quantize_group(x, scale_bits, out);  // the rare degenerate group: the reference path
    return;
  }
  // clamp(round_half_away(x / s), -127, 127), written so the compiler vectorises it: clamping y
  // to +-200 first changes nothing (anything beyond +-127.5 clips anyway) and keeps the integer
  // conversion in range; y - trunc(y) is exact in float for |y| < 2^23.
  // Ternaries rather than std::min/max and -fno-trapping-math (CMakeLists) let GCC vectorise it.
  for (int64_t i = 0; i < kInt8GroupSize; ++i) {
    float y = x[i] / s;
    y = y < -200.0f ? -200.0f : y;
    y = y > 200.0f ? 200.0f : y;
    int t = static_cast<int>(y);
    float f = y - static_cast<float>(t);
    t += (f >= 0.5f ? 1 : 0) - (f <= -0.5f ? 1 : 0);
    t = t < -127 ? -127 : t;
    t = t > 127 ? 127 : t;
    out[i] = static_cast<int8_t>(t);
  }
}

Int8State Int8Quantizer::quantize(const WeightViews& weights, uint64_t version,
                                  QuantizeStats* stats) {
  bool fresh_grid = scales_.empty();
  if (!fresh_grid) {
    STOA_CHECK(weights.size() >= scales_.size(), ErrorKind::kInvalidArgument,
               "int8 quantizer: ", weights.size(), " tensors given, the frozen grid has ",
               scales_.size(), " int8 tensors");
  }
  Int8State state;
  state.set_version(version);
  state.set_config_hash(config_hash_);
  std::atomic<int64_t> groups_total{0}, clip_total{0}, shrink_total{0};
  std::map<std::string, std::vector<uint16_t>> new_scales;
  for (const auto& [name, view] : weights) {
    STOA_CHECK(view.is_contiguous(), ErrorKind::kInvalidArgument, "int8 quantizer: tensor '", name,
               "' is not contiguous");
    Tensor converted;
    const float* data;
    if (view.dtype == DType::kF32) {
      data = view.as<const float>();
    } else {
      converted = to_f32(view);
      data = converted.as<const float>();
    }
    const TensorKind kind = tensor_kind_for(name, view.shape);
    if (kind != TensorKind::kInt8) {
      STOA_CHECK(fresh_grid || !scales_.count(name), ErrorKind::kInvalidArgument,
                 "int8 quantizer: tensor '", name, "' changed shape to ", shape_string(view.shape));
      const size_t n = static_cast<size_t>(view.numel());
      for (size_t i = 0; i < n; ++i)
        STOA_CHECK(std::isfinite(data[i]), ErrorKind::kInvalidArgument, "int8 quantizer: tensor '",
                   name, "' has a non-finite value at element ", i);
      if (kind == TensorKind::kF32) {
        // The router and expert_bias: the master's f32 bits exactly (the trainer's routing).
        std::vector<uint32_t> bits(n);
        if (n) std::memcpy(bits.data(), data, n * sizeof(float));
        state.add_f32(name, view.shape, std::move(bits));
      } else {
        std::vector<uint16_t> bf16(n);
        for (size_t i = 0; i < n; ++i) bf16[i] = f32_to_bf16(data[i]);
        state.add_bf16(name, view.shape, std::move(bf16));
      }
      continue;
    }
    int64_t rows = view.shape[0], cols = view.shape[1];
    int64_t groups = rows * (cols / kInt8GroupSize);
    std::vector<uint16_t> scales;
    if (fresh_grid) {
      scales.assign(static_cast<size_t>(groups), 0);
    } else {
      auto it = scales_.find(name);
      STOA_CHECK(it != scales_.end() && it->second.size() == static_cast<size_t>(groups),
                 ErrorKind::kInvalidArgument, "int8 quantizer: tensor '", name, "' of shape ",
                 shape_string(view.shape), " is not on the frozen grid");
      scales = it->second;
    }
    Int8Matrix q;
    q.rows = rows;
    q.cols = cols;
    q.values.resize(static_cast<size_t>(rows * cols));
    std::atomic<bool> non_finite{false};
    auto work = [&](int64_t begin, int64_t end) {
      int64_t clip = 0, shrink = 0;
      for (int64_t g = begin; g < end; ++g) {
        const float* x = data + g * kInt8GroupSize;
        float amax = group_amax(x);
        if (!std::isfinite(amax)) {
          non_finite = true;
          return;
        }
        uint16_t fresh = f32_to_f16(amax / 127.0f);
        uint16_t& s = scales[static_cast<size_t>(g)];
        if (fresh_grid) {
          s = fresh;
        } else if (should_rescale(amax, s, fresh, rule_)) {
          float sf = f16_to_f32(s);
          (sf == 0.0f || std::round(amax / sf) > 127.0f ? clip : shrink) += 1;
          s = fresh;
        }
        quantize_group_exact(x, s, q.values.data() + g * kInt8GroupSize);
      }
      clip_total += clip;
      shrink_total += shrink;
    };
    if (pool_ && groups >= 4096)
      pool_->parallel_for(groups, 1, work);
    else
      work(0, groups);
    STOA_CHECK(!non_finite, ErrorKind::kInvalidArgument, "int8 quantizer: tensor '", name,
               "' has a non-finite value");
    groups_total += groups;
    q.scales = scales;
    new_scales[name] = std::move(scales);
    state.add_int8(name, std::move(q));
  }
  if (!fresh_grid) {
    for (const auto& [name, s] : scales_)
      STOA_CHECK(new_scales.count(name), ErrorKind::kInvalidArgument, "int8 quantizer: tensor '",
                 name, "' of the frozen grid is missing");
  }
  scales_ = std::move(new_scales);
  if (stats) {
    stats->groups = groups_total;
    stats->rescaled_clip = clip_total;
    stats->rescaled_shrink = shrink_total;
  }
  return state;
}

void Int8Quantizer::adopt_grid(const Int8State& state) {
  scales_.clear();
  for (const auto& [name, t] : state.tensors())
    if (t.kind == TensorKind::kInt8) scales_[name] = t.q.scales;
  config_hash_ = state.config_hash();
}

}  // namespace stoa::pulse
