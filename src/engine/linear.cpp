#include "engine/linear.h"

#include "core/dtype.h"
#include "core/error.h"

namespace stoa::engine {

Linear Linear::from_f32(Tensor weight) {
  STOA_CHECK(weight.dtype() == DType::kF32 && weight.rank() == 2, ErrorKind::kInvalidArgument,
             "linear weight must be a 2-D f32 tensor, got ", dtype_name(weight.dtype()), " ",
             shape_string(weight.shape()));
  Linear l;
  l.rows_ = weight.dim(0);
  l.cols_ = weight.dim(1);
  l.int8_ = false;
  l.f32_ = std::move(weight);
  return l;
}

Linear Linear::from_int8(Int8Matrix weight) {
  STOA_CHECK(
      weight.rows > 0 && weight.cols > 0 && weight.cols % kInt8GroupSize == 0 &&
          weight.values.size() == static_cast<size_t>(weight.rows * weight.cols) &&
          weight.scales.size() == static_cast<size_t>(weight.rows * weight.cols / kInt8GroupSize),
      ErrorKind::kInvalidArgument, "malformed int8 matrix [", weight.rows, ", ", weight.cols,
      "] with ", weight.values.size(), " values and ", weight.scales.size(), " scales");
  Linear l;
  l.rows_ = weight.rows;
  l.cols_ = weight.cols;
  l.int8_ = true;
  l.q_ = std::move(weight);
  return l;
}

const Tensor& Linear::f32() const {
  STOA_CHECK(!int8_, ErrorKind::kInternal, "linear is int8, not f32");
  return f32_;
}

const Int8Matrix& Linear::int8() const {
  STOA_CHECK(int8_, ErrorKind::kInternal, "linear is f32, not int8");
  return q_;
}

Tensor& Linear::f32_mutable() {
  STOA_CHECK(!int8_, ErrorKind::kInternal, "linear is int8, not f32");
  return f32_;
}

Int8Matrix& Linear::int8_mutable() {
  STOA_CHECK(int8_, ErrorKind::kInternal, "linear is f32, not int8");
  return q_;
}

float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

float dot_int8_row(const int8_t* q, const uint16_t* scales, const float* x, int64_t n) {
  float total = 0;
  for (int64_t g = 0; g < n / kInt8GroupSize; ++g) {
    // Widen the group first, then the same 8-lane sum as dot_f32: the compiler vectorises the
    // two simple loops, where a fused int8-to-float multiply loop stays scalar.
    float w[kInt8GroupSize];
    const int8_t* qg = q + g * kInt8GroupSize;
    for (int64_t i = 0; i < kInt8GroupSize; ++i) w[i] = static_cast<float>(qg[i]);
    total += f16_to_f32(scales[g]) * dot_f32(w, x + g * kInt8GroupSize, kInt8GroupSize);
  }
  return total;
}

void Linear::forward(const float* x, int64_t tokens, float* y, ThreadPool& pool) const {
  const int64_t rows = rows_;
  const int64_t cols = cols_;
  if (tokens <= 0) return;
  // Chunks of 16 rows keep each thread's slice of W contiguous; the weight row stays in cache
  // while every token uses it.
  pool.parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      if (int8_) {
        const int8_t* q = q_.values.data() + r * cols;
        const uint16_t* s = q_.scales.data() + r * (cols / kInt8GroupSize);
        for (int64_t t = 0; t < tokens; ++t)
          y[t * rows + r] = dot_int8_row(q, s, x + t * cols, cols);
      } else {
        const float* w = f32_.as<float>() + r * cols;
        for (int64_t t = 0; t < tokens; ++t) y[t * rows + r] = dot_f32(w, x + t * cols, cols);
      }
    }
  });
}

void Linear::row(int64_t r, float* out) const {
  STOA_CHECK(r >= 0 && r < rows_, ErrorKind::kInvalidArgument, "row ", r, " out of range [0, ",
             rows_, ")");
  if (int8_) {
    const int8_t* q = q_.values.data() + r * cols_;
    const uint16_t* s = q_.scales.data() + r * (cols_ / kInt8GroupSize);
    for (int64_t g = 0; g < cols_ / kInt8GroupSize; ++g) {
      float scale = f16_to_f32(s[g]);
      for (int64_t i = 0; i < kInt8GroupSize; ++i) {
        out[g * kInt8GroupSize + i] = static_cast<float>(q[g * kInt8GroupSize + i]) * scale;
      }
    }
  } else {
    const float* w = f32_.as<float>() + r * cols_;
    for (int64_t c = 0; c < cols_; ++c) out[c] = w[c];
  }
}

}  // namespace stoa::engine
