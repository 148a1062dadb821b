// kernels_speed: a profiling harness for the W8A8 matmul at decode shapes (not a test). It runs
// the matrix products of one decode token of a bench model (every matrix of every layer plus the
// LM head, each its own memory, so the weights stream from DRAM as in the engine) on one thread
// and reports weight GB/s per wall- and per CPU-second. `stoa bench kernels` measures single
// shapes; this measures the sequence the engine runs, so A/B of a kernel change takes seconds.
//
//   kernels_speed <qwen3|lfm2moe> [reps] [batch] [threads] [ours|packed|llama|read] [target]
//
// `packed` runs the engine's fast path on VNNI machines: the same matrices repacked into 16-row
// panels (kernels/matmul_int8_packed.h).
//
// `llama` runs, instead of ours, a transcription of llama.cpp's x86 Q8_0 x Q8_0 dot product
// (one row at a time, one 256-bit block per step, sign trick + vpdpbusd, one FMA chain) over
// the same split layout, batch 1 only: the control for what that structure streams here.
//
// With threads = 2 every matrix's rows are split in two contiguous halves (as the engine's
// parallel_for does), each half on its own thread, with a spin barrier between matrices.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/machine.h"
#include "kernels/matmul_int8.h"
#include "kernels/matmul_int8_packed.h"
#include "kernels/targets.h"

using namespace stoa::kernels;

namespace {

double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Shape {
  int64_t rows, cols;
};

// The matrices one decode token reads, in the engine's order (fused groups as one matrix).
std::vector<Shape> model_shapes(const std::string& name) {
  std::vector<Shape> s;
  if (name == "qwen3") {  // bench-qwen3: hidden 768, ffn 2048, 12 q / 4 kv heads of 64, 14 layers
    for (int l = 0; l < 14; ++l) {
      s.push_back({1280, 768});  // q, k, v
      s.push_back({768, 768});   // o
      s.push_back({4096, 768});  // gate, up
      s.push_back({768, 2048});  // down
    }
    s.push_back({32768, 768});  // LM head
  } else if (name == "lfm2moe") {
    // bench-lfm2moe: hidden 1024; 4 active experts of ffn 512 per MoE layer (gate+up fused over
    // the 4 experts, then the 4 downs), 2 dense layers of ffn 3072; the attention/conv projections
    // approximated by 4 hidden x hidden matrices per layer.
    for (int l = 0; l < 12; ++l) {
      for (int k = 0; k < 4; ++k) s.push_back({1024, 1024});
      if (l < 2) {
        s.push_back({6144, 1024});
        s.push_back({1024, 3072});
      } else {
        for (int e = 0; e < 4; ++e) s.push_back({1024, 1024});  // gate+up of one expert
        for (int e = 0; e < 4; ++e) s.push_back({1024, 512});   // down of one expert
      }
    }
    s.push_back({32768, 1024});
  } else {
    std::fprintf(stderr, "unknown model %s (qwen3 | lfm2moe)\n", name.c_str());
    std::exit(2);
  }
  return s;
}

// KS_OFFSET=n places the values n bytes past a 64-byte boundary (default: wherever the
// allocator put them; glibc's large allocations start 16 bytes past a page).
struct Matrix {
  std::vector<int8_t> values;
  std::vector<uint16_t> scales;
  size_t offset = 0;
  Int8Weights view(const Shape& sh) const {
    return {values.data() + offset, scales.data(), sh.rows, sh.cols};
  }
};

#if defined(__x86_64__)
__attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni"))) void llama_style_rows(
    const Int8Weights& w, const int8_t* xq, const float* xd, float* y, int64_t lo, int64_t hi) {
  const int64_t nb = w.cols / kQ8Block;
  for (int64_t r = lo; r < hi; ++r) {
    const int8_t* wr = w.values + r * w.cols;
    const uint16_t* sr = w.scales + r * nb;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const float dw = _cvtsh_ss(sr[b]);
      const __m256 d = _mm256_set1_ps(dw * xd[b]);
      const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + b * 32));
      const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * 32));
      const __m256i ax = _mm256_sign_epi8(qx, qx);
      const __m256i sy = _mm256_sign_epi8(qy, qx);
      const __m256 q = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sy));
      acc = _mm256_fmadd_ps(d, q, acc);
    }
    __m128 res = _mm_add_ps(_mm256_extractf128_ps(acc, 1), _mm256_castps256_ps128(acc));
    res = _mm_add_ps(res, _mm_movehl_ps(res, res));
    res = _mm_add_ss(res, _mm_movehdup_ps(res));
    y[r] = _mm_cvtss_f32(res);
  }
}

// The read ceiling: the same bytes (values and scales) OR-reduced with 512-bit loads.
__attribute__((target("avx512f"))) void read_rows(const Int8Weights& w, float* y, int64_t lo,
                                                  int64_t hi) {
  __m512i acc = _mm512_setzero_si512();
  const int8_t* v = w.values + lo * w.cols;
  for (int64_t i = 0; i < (hi - lo) * w.cols; i += 64)
    acc = _mm512_or_si512(acc, _mm512_loadu_si512(v + i));
  const uint16_t* s = w.scales + lo * (w.cols / kQ8Block);
  if (w.scales)
    for (int64_t i = 0; i + 32 <= (hi - lo) * (w.cols / kQ8Block); i += 32)
      acc = _mm512_or_si512(acc, _mm512_loadu_si512(s + i));
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, acc);
  int32_t all = 0;
  for (int32_t l : lanes) all |= l;
  y[lo] = static_cast<float>(all);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "qwen3";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  const int64_t batch = argc > 3 ? std::atoll(argv[3]) : 1;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 1;
  const bool llama = argc > 5 && std::string(argv[5]) == "llama";
  const bool read = argc > 5 && std::string(argv[5]) == "read";
  const bool packed = argc > 5 && (std::string(argv[5]) == "packed" || std::getenv("KS_PACKREAD"));
  const std::vector<Shape> shapes = model_shapes(model);
  if (argc > 6) {
    bool found = false;
    for (int64_t t : available_targets()) {
      if (target_name(t) == argv[6]) {
        force_target(t);
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr, "target %s is not available here\n", argv[6]);
      return 2;
    }
  }
  if (llama && batch != 1) {
    std::fprintf(stderr, "the llama.cpp-style control is batch 1 only\n");
    return 2;
  }

  std::mt19937 rng(1);
  std::uniform_int_distribution<int> q(-127, 127);
  std::uniform_real_distribution<float> sc(0.001f, 0.01f);
  std::vector<Matrix> mats(shapes.size());
  double bytes = 0;
  int64_t max_cols = 0, max_rows = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& sh = shapes[i];
    mats[i].values.resize(static_cast<size_t>(sh.rows * sh.cols) + 128);
    if (const char* off = std::getenv("KS_OFFSET")) {
      const auto addr = reinterpret_cast<uintptr_t>(mats[i].values.data());
      mats[i].offset = (64 - addr % 64) % 64 + static_cast<size_t>(std::atoi(off));
    }
    for (auto& v : mats[i].values) v = static_cast<int8_t>(q(rng));
    mats[i].scales.resize(static_cast<size_t>(sh.rows * sh.cols / kQ8Block));
    for (auto& s : mats[i].scales) s = 0x2000 + static_cast<uint16_t>(q(rng) & 0x3ff);  // ~0.008
    bytes += static_cast<double>(sh.rows * sh.cols) * (1.0 + 2.0 / kQ8Block);
    max_cols = std::max(max_cols, sh.cols);
    max_rows = std::max(max_rows, sh.rows);
  }
  std::vector<PackedInt8> packs(packed ? shapes.size() : 0);
  for (size_t i = 0; i < packs.size(); ++i) packs[i] = PackedInt8::pack(mats[i].view(shapes[i]));
  std::vector<float> x(static_cast<size_t>(batch * max_cols));
  for (auto& v : x) v = sc(rng) * static_cast<float>(q(rng));
  std::vector<int8_t> xq(x.size());
  std::vector<float> xd(x.size() / kQ8Block);
  std::vector<int32_t> xs(x.size() / kQ8Block);
  std::vector<float> y(static_cast<size_t>(batch * max_rows));

  auto run_range = [&](int part, int parts) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Shape& sh = shapes[i];
      const Q8Activations acts{xq.data(), xd.data(), batch, sh.cols, xs.data()};
      int64_t chunk = (sh.rows + parts - 1) / parts;
      chunk = (chunk + 15) / 16 * 16;
      const int64_t lo = std::min<int64_t>(sh.rows, part * chunk);
      const int64_t hi = std::min<int64_t>(sh.rows, lo + chunk);
      if (lo >= hi) continue;
#if defined(__x86_64__)
      if (read && packed) {
        const int64_t p0 = lo / 16, p1 = (hi + 15) / 16;
        Int8Weights v{
            reinterpret_cast<const int8_t*>(packs[i].data() + p0 * packs[i].panel_bytes()), nullptr,
            (p1 - p0) * static_cast<int64_t>(packs[i].panel_bytes()) / 64, 64};
        read_rows(v, y.data(), 0, v.rows);
        continue;
      }
      if (read) {
        read_rows(mats[i].view(sh), y.data(), lo, hi);
        continue;
      }
      if (llama) {
        llama_style_rows(mats[i].view(sh), xq.data(), xd.data(), y.data(), lo, hi);
        continue;
      }
#endif
      if (packed) {
        matmul_w8a8_packed(packs[i], acts, y.data(), sh.rows, lo, hi);
      } else {
        matmul_w8a8(mats[i].view(sh), acts, y.data(), sh.rows, lo, hi);
      }
    }
  };
  quantize_activations_q8(x.data(), max_cols, {xq.data(), xd.data(), batch, max_cols, xs.data()});

  double best_wall = 1e30, best_cpu = 1e30;
  for (int r = 0; r < reps + 1; ++r) {
    const double w0 = wall_now(), c0 = stoa::process_cpu_seconds();
    if (threads <= 1) {
      run_range(0, 1);
    } else {
      // No barrier per matrix: each thread runs its halves back to back (the engine syncs per
      // operation; this measures the kernel's streaming rate, not the handover).
      std::thread t([&] { run_range(1, 2); });
      run_range(0, 2);
      t.join();
    }
    const double w = wall_now() - w0, c = stoa::process_cpu_seconds() - c0;
    if (r == 0) continue;  // warm-up
    best_wall = std::min(best_wall, w);
    best_cpu = std::min(best_cpu, c);
  }
  // A checksum of the last product's bits (the LM head, every row and batch row, recomputed
  // alone with the same thread split: the timed loop shares y between matrices without a
  // barrier), to compare kernel versions: a change of walk must not change a single bit.
  const Shape& last = shapes.back();
  {
    const Q8Activations acts{xq.data(), xd.data(), batch, last.cols, xs.data()};
    const int parts = threads <= 1 ? 1 : 2;
    int64_t chunk = (last.rows + parts - 1) / parts;
    chunk = (chunk + 15) / 16 * 16;
    auto part_of = [&](int part) {
      const int64_t lo = std::min<int64_t>(last.rows, part * chunk);
      const int64_t hi = std::min<int64_t>(last.rows, lo + chunk);
      if (lo >= hi) return;
      if (packed) {
        matmul_w8a8_packed(packs.back(), acts, y.data(), last.rows, lo, hi);
      } else {
        matmul_w8a8(mats.back().view(last), acts, y.data(), last.rows, lo, hi);
      }
    };
    if (parts == 1) {
      part_of(0);
    } else {
      std::thread t([&] { part_of(1); });
      part_of(0);
      t.join();
    }
  }
  uint64_t sum = 1469598103934665603ull;
  for (int64_t i = 0; i < batch * last.rows; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &y[static_cast<size_t>(i)], 4);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  std::printf("checksum %016llx  ", static_cast<unsigned long long>(sum));
  std::printf(
      "%s %s (%s) batch %lld threads %d: %.1f MB per token, best of %d: %.3f ms wall (%.1f GB/s, "
      "%.1f "
      "tok/s), %.3f ms cpu (%.1f GB/s per cpu-s)\n",
      model.c_str(),
      read     ? "read-only"
      : llama  ? "llama-style"
      : packed ? "packed"
               : "ours",
      target_name(active_target()).c_str(), static_cast<long long>(batch), threads, bytes / 1e6,
      reps, best_wall * 1e3, bytes / best_wall / 1e9, 1.0 / best_wall, best_cpu * 1e3,
      bytes / best_cpu / 1e9);
  return 0;
}
