#include "bench/scale_version.h"

#include <time.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "pulse/anchor_stream.h"

namespace stoa::bench {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One AdamW step from a fresh optimiser on a master `w`: m̂ = g, v̂ = g², so the step is
// lr * sign(g) (eps negligible), plus decoupled weight decay.
float adam_first_step(float w, uint64_t random, float lr, float wd) {
  const float sign = (random >> 63) ? 1.0f : -1.0f;
  return w - lr * sign - lr * wd * w;
}

// A sub-grid offset in (-0.5, 0.5) from 24 random bits, kept clear of the rounding edges.
float offset(uint64_t random) {
  return (static_cast<float>(random & 0xffffff) / 16777216.0f - 0.5f) * 0.998f;
}

class VersionSink final : public pulse::AnchorSink {
 public:
  VersionSink(const SimulatedVersionOptions& o, SimulatedVersion* out) : o_(o), out_(out) {}

  void begin(const pulse::BlobHeader& header, const Hash128& config_hash) override {
    maker_ = std::make_unique<pulse::VersionMaker>(header.to_version, header.to_version + 1,
                                                   config_hash);
  }

  void tensor(const std::string& name, pulse::StateTensor t, const Hash128& hash) override {
    const double sim0 = thread_cpu_seconds();
    const size_t n = static_cast<size_t>(t.numel());
    master_.resize(n);
    const uint64_t salt = mix(o_.seed ^ hash_bytes(name.data(), name.size()).low);
    const float lr = static_cast<float>(o_.lr), wd = static_cast<float>(o_.weight_decay);
    if (t.kind == pulse::TensorKind::kInt8) {
      const size_t groups = t.q.scales.size();
      for (size_t g = 0; g < groups; ++g) {
        const float s = f16_to_f32(t.q.scales[g]);
        for (size_t k = 0; k < static_cast<size_t>(kInt8GroupSize); ++k) {
          const size_t i = g * kInt8GroupSize + k;
          const uint64_t r = mix(salt + i);
          const float q = static_cast<float>(t.q.values[i]);
          // At +-127 the master stays inside the grid's range (else the view would clip it).
          float u = offset(r);
          if ((q >= 127.0f && u > 0) || (q <= -127.0f && u < 0)) u = -u;
          master_[i] = adam_first_step((q + u) * s, r, lr, wd);
        }
      }
    } else if (t.kind == pulse::TensorKind::kBf16) {
      for (size_t i = 0; i < n; ++i) {
        const uint64_t r = mix(salt + i);
        const float w = bf16_to_f32(t.bf16[i]);
        // |w| * 2^-8 is at most the gap to either bf16 neighbour (the one below a power of two
        // is half the one above), so w + offset * that rounds back to w.
        master_[i] = adam_first_step(w + offset(r) * std::fabs(w) * 0x1p-8f, r, lr, wd);
      }
    } else {
      for (size_t i = 0; i < n; ++i)
        master_[i] = adam_first_step(f32_from_bits(t.f32[i]), mix(salt + i), lr, wd);
    }
    const double make0 = thread_cpu_seconds();
    out_->simulate_cpu_seconds += make0 - sim0;
    maker_->tensor(name, t, hash, master_.data());
    out_->make_cpu_seconds += thread_cpu_seconds() - make0;
  }

  pulse::VersionMaker& maker() { return *maker_; }

 private:
  const SimulatedVersionOptions& o_;
  SimulatedVersion* out_;
  std::unique_ptr<pulse::VersionMaker> maker_;
  std::vector<float> master_;
};

}  // namespace

SimulatedVersion make_simulated_version(const std::string& anchor_path,
                                        const SimulatedVersionOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  SimulatedVersion out;
  VersionSink sink(options, &out);
  pulse::stream_anchor_file(anchor_path, nullptr, sink);
  const double c0 = thread_cpu_seconds();
  out.patch = sink.maker().finish();
  out.make_cpu_seconds += thread_cpu_seconds() - c0;
  out.stats = sink.maker().stats();
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace stoa::bench
