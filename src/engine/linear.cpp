#include "engine/linear.h"

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/matmul_int8.h"

#include <vector>

namespace stoa::engine {

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::kReference:
      return "reference";
    case Backend::kW8A8:
      return "w8a8";
    case Backend::kW8A32:
      return "w8a32";
  }
  return "?";
}

Backend parse_backend(const std::string& name) {
  if (name == "reference") return Backend::kReference;
  if (name == "w8a8") return Backend::kW8A8;
  if (name == "w8a32") return Backend::kW8A32;
  fail(ErrorKind::kInvalidArgument, "unknown engine backend '", name,
       "' (expected reference, w8a8 or w8a32)");
}

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

// The int8 dot product, on a row already widened to float (unscaled): per group of 32, the same
// 8-lane sum as dot_f32, times the group's scale. Widening once per row serves every token of a
// pass, and the arithmetic per output element is the same for any token count.
static float dot_widened_row(const float* w, const float* scales, const float* x, int64_t n) {
  float total = 0;
  for (int64_t g = 0; g < n / kInt8GroupSize; ++g) {
    total += scales[g] * dot_f32(w + g * kInt8GroupSize, x + g * kInt8GroupSize, kInt8GroupSize);
  }
  return total;
}

// Widens one int8 row and its f16 scales to float.
static void widen_row(const int8_t* q, const uint16_t* scales, int64_t n, float* w, float* s) {
  for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>(q[i]);
  for (int64_t g = 0; g < n / kInt8GroupSize; ++g) s[g] = f16_to_f32(scales[g]);
}

float dot_int8_row(const int8_t* q, const uint16_t* scales, const float* x, int64_t n) {
  std::vector<float> w(static_cast<size_t>(n)), s(static_cast<size_t>(n / kInt8GroupSize));
  widen_row(q, scales, n, w.data(), s.data());
  return dot_widened_row(w.data(), s.data(), x, n);
}

namespace {

// Quantised activations of the pass in flight. Grown to the largest pass seen and then reused,
// so steady-state decode steps allocate nothing. One per calling thread: passes are issued by
// the thread that owns the runner, the pool's workers only read it.
struct ActivationScratch {
  std::vector<int8_t> values;
  std::vector<float> scales;
  kernels::Q8Activations quantize(const float* x, int64_t tokens, int64_t cols) {
    const size_t n = static_cast<size_t>(tokens * cols);
    if (values.size() < n) values.resize(n);
    if (scales.size() < n / kInt8GroupSize) scales.resize(n / kInt8GroupSize);
    kernels::Q8Activations acts{values.data(), scales.data(), tokens, cols};
    kernels::quantize_activations_q8(x, cols, acts);
    return acts;
  }
};
thread_local ActivationScratch t_scratch;

}  // namespace

void Linear::forward(const float* x, int64_t tokens, float* y, ThreadPool& pool) const {
  const int64_t rows = rows_;
  const int64_t cols = cols_;
  if (tokens <= 0) return;
  if (int8_ && backend_ != Backend::kReference) {
    const kernels::Int8Weights w{q_.values.data(), q_.scales.data(), rows, cols};
    // Rows split in multiples of 16 keep every thread on whole row tiles; the bits do not
    // depend on the split (kernels' guarantee), only the speed does.
    if (backend_ == Backend::kW8A8) {
      const kernels::Q8Activations acts = t_scratch.quantize(x, tokens, cols);
      pool.parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
        kernels::matmul_w8a8(w, acts, y, rows, begin, end);
      });
    } else {
      pool.parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
        kernels::matmul_w8a32(w, x, cols, tokens, y, rows, begin, end);
      });
    }
    return;
  }
  // Chunks of 16 rows keep each thread's slice of W contiguous; the weight row stays in cache
  // while every token uses it.
  pool.parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> widened(int8_ ? static_cast<size_t>(cols) : 0);
    std::vector<float> scales(int8_ ? static_cast<size_t>(cols / kInt8GroupSize) : 0);
    for (int64_t r = begin; r < end; ++r) {
      if (int8_) {
        widen_row(q_.values.data() + r * cols, q_.scales.data() + r * (cols / kInt8GroupSize), cols,
                  widened.data(), scales.data());
        for (int64_t t = 0; t < tokens; ++t) {
          y[t * rows + r] = dot_widened_row(widened.data(), scales.data(), x + t * cols, cols);
        }
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
