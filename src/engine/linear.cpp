#include "engine/linear.h"

#include "core/dtype.h"
#include "core/enum_names.h"
#include "core/error.h"
#include "engine/pass_workers.h"
#include "engine/scratch.h"
#include "kernels/matmul_int8.h"

#include <algorithm>

#include <vector>

namespace stoa::engine {

constexpr EnumName<Backend> kBackendNames[] = {
    {Backend::kReference, "reference"}, {Backend::kW8A8, "w8a8"}, {Backend::kW8A32, "w8a32"}};

const char* backend_name(Backend backend) {
  return enum_name(kBackendNames, backend);
}

Backend parse_backend(const std::string& name) {
  if (auto backend = enum_from_name(kBackendNames, name)) return *backend;
  fail(ErrorKind::kInvalidArgument, "unknown engine backend '", name,
       "' (expected reference, w8a8 or w8a32)");
}

namespace {

// Whether a Linear computing with `backend` holds packed panels rather than the grid.
bool packs(Backend backend, bool grid_held) {
  return !grid_held && backend == Backend::kW8A8 && kernels::packed_w8a8_preferred();
}

template <class Grid>
kernels::Int8Weights view(const Grid& q) {
  return kernels::Int8Weights{q.values.data(), q.scales.data(), q.rows, q.cols};
}

}  // namespace

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
  l.q_.rows = weight.rows;
  l.q_.cols = weight.cols;
  if (packs(l.backend_, l.grid_held_)) {
    l.packed_ = kernels::PackedInt8::pack(view(weight));
  } else {
    l.assign_grid(weight);
  }
  return l;
}

void Linear::set_backend(Backend backend) {
  backend_ = backend;
  settle_layout();
}

void Linear::hold_grid() {
  grid_held_ = true;
  settle_layout();
}

kernels::Int8Weights Linear::grid_view() const {
  STOA_CHECK(int8_, ErrorKind::kInternal, "linear is f32, not int8");
  if (!packed_.empty()) return kernels::Int8Weights{nullptr, nullptr, rows_, cols_};
  return view(q_);
}

void Linear::assign_grid(const Int8Matrix& m) {
  q_.rows = m.rows;
  q_.cols = m.cols;
  // assign() keeps the allocation when it is large enough: a held grid keeps its addresses.
  q_.values.assign(m.values.begin(), m.values.end());
  q_.scales.assign(m.scales.begin(), m.scales.end());
}

void Linear::settle_layout() {
  if (!int8_) return;
  const bool want_packed = packs(backend_, grid_held_);
  if (want_packed && packed_.empty()) {
    packed_ = kernels::PackedInt8::pack(view(q_));
    PageVector<int8_t>().swap(q_.values);  // release, not just clear
    PageVector<uint16_t>().swap(q_.scales);
  } else if (!want_packed && !packed_.empty()) {
    q_.values.resize(static_cast<size_t>(rows_ * cols_));
    q_.scales.resize(static_cast<size_t>(rows_ * cols_ / kInt8GroupSize));
    packed_.unpack_rows(0, rows_, q_.values.data(), q_.scales.data());
    packed_ = kernels::PackedInt8{};
  }
}

void Linear::replace_int8(Int8Matrix weight) {
  STOA_CHECK(int8_, ErrorKind::kInternal, "linear is f32, not int8");
  STOA_CHECK(weight.rows == rows_ && weight.cols == cols_ &&
                 weight.values.size() == static_cast<size_t>(rows_ * cols_) &&
                 weight.scales.size() == static_cast<size_t>(rows_ * cols_ / kInt8GroupSize),
             ErrorKind::kInvalidArgument, "update is [", weight.rows, ", ", weight.cols, "] with ",
             weight.values.size(), " values and ", weight.scales.size(), " scales, the tensor is [",
             rows_, ", ", cols_, "]");
  if (packs(backend_, grid_held_)) {
    packed_ = kernels::PackedInt8::pack(view(weight));
    return;
  }
  packed_ = kernels::PackedInt8{};
  assign_grid(weight);  // in place when the grid is held: a device reading it keeps reading it
}

void Linear::replace_int8_values(std::span<const int8_t> values) {
  STOA_CHECK(int8_, ErrorKind::kInternal, "linear is f32, not int8");
  STOA_CHECK(values.size() == static_cast<size_t>(rows_ * cols_), ErrorKind::kInvalidArgument,
             "update has ", values.size(), " values, the tensor has ", rows_ * cols_);
  if (packed_.empty()) {
    std::copy(values.begin(), values.end(), q_.values.begin());
    return;
  }
  Int8Matrix m = int8();  // the scales stay
  std::copy(values.begin(), values.end(), m.values.begin());
  replace_int8(std::move(m));
}

int8_t Linear::int8_value(int64_t position) const {
  return packed_.empty() ? q_.values[static_cast<size_t>(position)]
                         : packed_.value(position / cols_, position % cols_);
}

void Linear::set_int8_value(int64_t position, int8_t v) {
  if (packed_.empty())
    q_.values[static_cast<size_t>(position)] = v;
  else
    packed_.set_value(position / cols_, position % cols_, v);
}

void Linear::exchange_int8_values(std::span<const uint64_t> positions, const int8_t* values,
                                  int8_t* old) {
  if (!packed_.empty()) return packed_.exchange_values(positions, values, old);
  constexpr size_t kAhead = 16;  // the grid's addresses need no arithmetic: prefetch a few ahead
  int8_t* grid = q_.values.data();
  const size_t n = positions.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) __builtin_prefetch(grid + positions[i + kAhead], 1);
    int8_t& v = grid[positions[i]];
    if (old) old[i] = v;
    v = values[i];
  }
}

uint16_t Linear::int8_scale(int64_t group) const {
  const int64_t per_row = cols_ / kInt8GroupSize;
  return packed_.empty() ? q_.scales[static_cast<size_t>(group)]
                         : packed_.scale(group / per_row, group % per_row);
}

void Linear::set_int8_scale(int64_t group, uint16_t bits) {
  const int64_t per_row = cols_ / kInt8GroupSize;
  if (packed_.empty())
    q_.scales[static_cast<size_t>(group)] = bits;
  else
    packed_.set_scale(group / per_row, group % per_row, bits);
}

size_t Linear::nbytes() const {
  return int8_ ? q_.nbytes() + packed_.nbytes() : f32_.nbytes();
}

size_t Linear::int8_grid_nbytes() const {
  STOA_CHECK(int8_, ErrorKind::kInternal, "linear is f32, not int8");
  return static_cast<size_t>(rows_ * cols_) +
         static_cast<size_t>(rows_ * cols_ / kInt8GroupSize) * sizeof(uint16_t);
}

const Tensor& Linear::f32() const {
  STOA_CHECK(!int8_, ErrorKind::kInternal, "linear is int8, not f32");
  return f32_;
}

Int8Matrix Linear::int8() const {
  STOA_CHECK(int8_, ErrorKind::kInternal, "linear is f32, not int8");
  Int8Matrix m;
  if (packed_.empty()) {
    m.rows = rows_;
    m.cols = cols_;
    m.values.assign(q_.values.begin(), q_.values.end());
    m.scales.assign(q_.scales.begin(), q_.scales.end());
    return m;
  }
  m.rows = rows_;
  m.cols = cols_;
  m.values.resize(static_cast<size_t>(rows_ * cols_));
  m.scales.resize(static_cast<size_t>(rows_ * cols_ / kInt8GroupSize));
  packed_.unpack_rows(0, rows_, m.values.data(), m.scales.data());
  return m;
}

void Linear::int8_rows(int64_t r0, int64_t r1, int8_t* values, uint16_t* scales) const {
  STOA_CHECK(int8_ && 0 <= r0 && r0 <= r1 && r1 <= rows_, ErrorKind::kInvalidArgument,
             "int8 rows [", r0, ", ", r1, ") of a ", int8_ ? "int8" : "f32", " linear with ", rows_,
             " rows");
  const int64_t per_row = cols_ / kInt8GroupSize;
  if (packed_.empty()) {
    std::copy(q_.values.begin() + r0 * cols_, q_.values.begin() + r1 * cols_, values);
    std::copy(q_.scales.begin() + r0 * per_row, q_.scales.begin() + r1 * per_row, scales);
    return;
  }
  packed_.unpack_rows(r0, r1, values, scales);
}

Tensor& Linear::f32_mutable() {
  STOA_CHECK(!int8_, ErrorKind::kInternal, "linear is int8, not f32");
  return f32_;
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
  std::vector<int32_t> sums;  // block sums, for the packed kernel
  void reserve(int64_t elements) {
    const size_t n = static_cast<size_t>(elements);
    if (values.size() < n) values.resize(n);
    if (scales.size() < n / kInt8GroupSize) scales.resize(n / kInt8GroupSize);
    if (sums.size() < n / kInt8GroupSize) sums.resize(n / kInt8GroupSize);
  }
  // A view of the scratch at element `at` for x [tokens, cols] (filled by quantize_all).
  kernels::Q8Activations view_at(int64_t tokens, int64_t cols, int64_t at) {
    return kernels::Q8Activations{values.data() + at, scales.data() + at / kInt8GroupSize, tokens,
                                  cols, sums.data() + at / kInt8GroupSize};
  }
};

// Quantises inputs[k] (x[k] [acts[k].batch, acts[k].cols]) into acts[k], all of them in ONE
// parallel operation over their rows when there are enough (a prefill, or a MoE layer's experts
// with a few tokens each). Rows are quantised independently: the same bits whatever the split.
void quantize_all(std::span<const float* const> x, std::span<const kernels::Q8Activations> acts,
                  ThreadPool& pool) {
  int64_t rows = 0;
  for (const auto& a : acts) rows += a.batch;
  auto rows_of = [&](size_t k, int64_t begin, int64_t end) {
    const kernels::Q8Activations& a = acts[k];
    const int64_t groups = a.cols / kInt8GroupSize;
    const kernels::Q8Activations part{a.values + begin * a.cols, a.scales + begin * groups,
                                      end - begin, a.cols, a.sums + begin * groups};
    kernels::quantize_activations_q8(x[k] + begin * a.cols, a.cols, part);
  };
  if (rows < 16 || pool.size() == 1) {
    for (size_t k = 0; k < acts.size(); ++k) rows_of(k, 0, acts[k].batch);
    return;
  }
  parallel_for(pool, rows, 1, [&](int64_t begin, int64_t end) {
    int64_t first = 0;  // global row index of acts[k]'s row 0
    for (size_t k = 0; k < acts.size() && first < end; first += acts[k].batch, ++k) {
      const int64_t lo = std::max(begin, first), hi = std::min(end, first + acts[k].batch);
      if (lo < hi) rows_of(k, lo - first, hi - first);
    }
  });
}

thread_local ActivationScratch t_scratch;

}  // namespace

void Linear::forward(const float* x, int64_t tokens, float* y, ThreadPool& pool) const {
  const LinearJob job{this, x, tokens, y};
  forward_jobs(std::span<const LinearJob>(&job, 1), pool);
}

void Linear::forward_group(std::span<const Linear* const> linears, const float* x, int64_t tokens,
                           float* const* ys, ThreadPool& pool) {
  constexpr size_t kMax = 8;
  STOA_CHECK(linears.size() <= kMax, ErrorKind::kInternal, "a linear group of ", linears.size(),
             " matrices (at most ", kMax, ")");
  LinearJob jobs[kMax];
  for (size_t i = 0; i < linears.size(); ++i) jobs[i] = {linears[i], x, tokens, ys[i]};
  forward_jobs(std::span<const LinearJob>(jobs, linears.size()), pool);
}

void Linear::forward_jobs(std::span<const LinearJob> jobs, ThreadPool& pool) {
  if (jobs.empty()) return;
  const Backend backend = jobs[0].linear->backend_;
  bool fused = backend != Backend::kReference;
  for (const LinearJob& j : jobs) {
    fused = fused && j.linear->int8_ && j.linear->backend_ == backend;
  }
  if (!fused) {
    // A mixed group: each job on its own backend (never an int8 kW8A8 Linear on the plain
    // loops: they would give other bits than the same Linear alone).
    for (const LinearJob& j : jobs) {
      if (j.tokens <= 0) continue;
      if (jobs.size() > 1)
        forward_jobs(std::span<const LinearJob>(&j, 1), pool);
      else
        j.linear->forward_plain(j.x, j.tokens, j.y, pool);
    }
    return;
  }
  // Row offsets of each job in the concatenation of all their rows (jobs without tokens
  // contribute none).
  thread_local std::vector<int64_t> offset_buf;
  thread_local std::vector<kernels::Q8Activations> acts_buf;
  const size_t count = jobs.size();
  if (offset_buf.size() < count + 1) offset_buf.resize(count + 1);
  int64_t* offset = offset_buf.data();
  offset[0] = 0;
  for (size_t i = 0; i < count; ++i) {
    offset[i + 1] = offset[i] + (jobs[i].tokens > 0 ? jobs[i].linear->rows_ : 0);
  }
  const int64_t total = offset[count];
  if (total == 0) return;
  auto each = [&](int64_t begin, int64_t end, auto&& fn) {
    for (size_t i = 0; i < count; ++i) {
      const int64_t lo = std::max(begin, offset[i]);
      const int64_t hi = std::min(end, offset[i + 1]);
      if (lo < hi) fn(i, lo - offset[i], hi - offset[i]);
    }
  };
  // All rows of all jobs go out in ONE parallel operation: each thread takes a contiguous
  // stretch of the concatenated rows (multiples of 16 = whole kernel row tiles), clipped to each
  // matrix. The bits do not depend on the split (kernels' guarantee), only the speed does.
  if (backend == Backend::kW8A8) {
    // Each distinct input is quantised once (Q/K/V and gate/up share theirs).
    if (acts_buf.size() < count) acts_buf.resize(count);
    kernels::Q8Activations* acts = acts_buf.data();
    int64_t elements = 0;
    for (size_t i = 0; i < count; ++i) elements += jobs[i].tokens * jobs[i].linear->cols_;
    t_scratch.reserve(elements);
    thread_local std::vector<const float*> distinct_x;
    thread_local std::vector<kernels::Q8Activations> distinct_acts;
    distinct_x.clear();
    distinct_acts.clear();
    int64_t at = 0;
    for (size_t i = 0; i < count; ++i) {
      const LinearJob& j = jobs[i];
      if (j.tokens <= 0) continue;
      size_t same = i;
      for (size_t k = 0; k < i; ++k) {
        if (jobs[k].tokens == j.tokens && jobs[k].x == j.x &&
            jobs[k].linear->cols_ == j.linear->cols_) {
          same = k;
          break;
        }
      }
      if (same != i) {
        acts[i] = acts[same];
        continue;
      }
      acts[i] = t_scratch.view_at(j.tokens, j.linear->cols_, at);
      at += j.tokens * j.linear->cols_;
      distinct_x.push_back(j.x);
      distinct_acts.push_back(acts[i]);
    }
    quantize_all(distinct_x, distinct_acts, pool);
    parallel_for(pool, total, 16, [&](int64_t begin, int64_t end) {
      each(begin, end, [&](size_t i, int64_t lo, int64_t hi) {
        const Linear& l = *jobs[i].linear;
        if (!l.packed_.empty()) {
          kernels::matmul_w8a8_packed(l.packed_, acts[i], jobs[i].y, l.rows_, lo, hi);
        } else {
          kernels::matmul_w8a8(view(l.q_), acts[i], jobs[i].y, l.rows_, lo, hi);
        }
      });
    });
  } else {
    parallel_for(pool, total, 16, [&](int64_t begin, int64_t end) {
      each(begin, end, [&](size_t i, int64_t lo, int64_t hi) {
        const LinearJob& j = jobs[i];
        const Linear& l = *j.linear;
        kernels::matmul_w8a32(view(l.q_), j.x, l.cols_, j.tokens, j.y, l.rows_, lo, hi);
      });
    });
  }
}

void Linear::forward_plain(const float* x, int64_t tokens, float* y, ThreadPool& pool) const {
  const int64_t rows = rows_;
  const int64_t cols = cols_;
  STOA_CHECK(packed_.empty(), ErrorKind::kInternal, "plain loops on packed int8 weights");
  // Chunks of 16 rows keep each thread's slice of W contiguous; the weight row stays in cache
  // while every token uses it.
  parallel_for(pool, rows, 16, [&](int64_t begin, int64_t end) {
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
    const int8_t* q = nullptr;
    const uint16_t* s = nullptr;
    if (packed_.empty()) {
      q = q_.values.data() + r * cols_;
      s = q_.scales.data() + r * (cols_ / kInt8GroupSize);
    } else {  // unpack the row (an embedding lookup: one row per token)
      thread_local std::vector<int8_t> values;
      thread_local std::vector<uint16_t> scales;
      int8_t* qv = scratch(values, static_cast<size_t>(cols_));
      uint16_t* sv = scratch(scales, static_cast<size_t>(cols_ / kInt8GroupSize));
      packed_.unpack_row(r, qv, sv);
      q = qv;
      s = sv;
    }
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
