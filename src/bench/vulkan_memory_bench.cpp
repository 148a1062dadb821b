#include "bench/vulkan_memory_bench.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/scale_model.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/machine.h"
#include "engine/engine_weights.h"
#include "model/weights.h"
#include "pulse/int8_state.h"
#ifdef STOA_HAVE_VULKAN
#include "gpu/vulkan/vulkan_backend.h"
#endif

namespace stoa::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// xorshift64*: 8 random bytes a step, fast enough for 9 GB of weights in seconds.
struct FastRandom {
  uint64_t s;
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1DULL;
  }
};

// Random int8 grid values in [-127, 127] on scales small enough that a pass stays finite.
Int8Matrix random_grid(int64_t rows, int64_t cols, FastRandom& rng) {
  Int8Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.values.resize(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < m.values.size(); i += 8) {
    uint64_t r = rng.next();
    for (size_t j = 0; j < 8 && i + j < m.values.size(); ++j, r >>= 8)
      m.values[i + j] = std::max<int8_t>(static_cast<int8_t>(r & 0xff), -127);
  }
  m.scales.assign(static_cast<size_t>(rows * cols / kInt8GroupSize), f32_to_f16(1e-4f));
  return m;
}

// Norms at 1, every other small tensor (conv kernels, the router, the expert bias) small.
Tensor random_f32(const TensorSpec& spec, FastRandom& rng) {
  Tensor t(DType::kF32, spec.shape);
  float* x = t.as<float>();
  const bool norm = spec.name.find("norm") != std::string::npos;
  for (int64_t i = 0; i < t.numel(); ++i)
    x[i] = norm ? 1.0f : static_cast<float>(static_cast<int64_t>(rng.next() % 2001) - 1000) * 2e-5f;
  return t;
}

// The int8 view's bytes as PULSE carries the state (docs/design/scale.md's int8_bytes).
uint64_t state_bytes(const TensorSpec& spec) {
  const auto n = static_cast<uint64_t>(shape_numel(spec.shape));
  switch (pulse::tensor_kind_for(spec.name, spec.shape)) {
    case pulse::TensorKind::kInt8:
      return n + n / kInt8GroupSize * 2;
    case pulse::TensorKind::kBf16:
      return n * 2;
    case pulse::TensorKind::kF32:
      return n * 4;
  }
  return 0;
}

}  // namespace

int run_vulkan_memory_bench(const VulkanMemoryBenchOptions& o) {
#ifndef STOA_HAVE_VULKAN
  (void)o;
  fail(ErrorKind::kUnsupported, "stoa bench vulkan-memory: this build has no Vulkan backend");
#else
  using gpu::vulkan::WeightPlacement;
  STOA_CHECK(o.placement == "shared" || o.placement == "mirror", ErrorKind::kInvalidArgument,
             "--placement is shared or mirror, not '", o.placement, "'");
  STOA_CHECK(o.tokens >= 1, ErrorKind::kInvalidArgument, "--tokens must be >= 1");
  const ModelConfig config = scale_config(o.preset, o.layers);
  std::string why_not;
  std::shared_ptr<gpu::vulkan::Context> ctx = gpu::vulkan::Context::create(&why_not);
  STOA_CHECK(ctx != nullptr, ErrorKind::kUnsupported, "no Vulkan device: ", why_not);
  const ProcessMemory at_start = own_process_memory();

  // The weights, one tensor alive beside them at a time (a worker streaming its anchor).
  auto t0 = Clock::now();
  auto weights =
      std::make_unique<engine::EngineWeights>(engine::EngineWeights::begin_state(config));
  FastRandom rng{0x9E3779B97F4A7C15ULL};
  uint64_t int8_bytes = 0;
  for (const TensorSpec& spec : expected_tensors(config)) {
    int8_bytes += state_bytes(spec);
    if (engine::int8_eligible(spec.name, spec.shape)) {
      weights->add_state_int8(spec.name, random_grid(spec.shape[0], spec.shape[1], rng));
    } else {
      weights->add_state_f32(spec.name, random_f32(spec, rng));
    }
  }
  weights->finish_state();
  const double build_s = seconds_since(t0);
  const uint64_t host_weight_bytes = weights->nbytes();
  const ProcessMemory after_weights = own_process_memory();

  t0 = Clock::now();
  gpu::vulkan::VulkanBackend backend(
      ctx, std::move(weights),
      o.placement == "mirror" ? WeightPlacement::kMirror : WeightPlacement::kShareWhereUnified);
  const double backend_s = seconds_since(t0);
  const ProcessMemory after_backend = own_process_memory();

  t0 = Clock::now();
  std::vector<int32_t> prompt(static_cast<size_t>(o.tokens));
  for (size_t i = 0; i < prompt.size(); ++i)
    prompt[i] = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(config.vocab_size));
  std::unique_ptr<engine::SequenceState> seq = backend.new_state(o.tokens);
  const engine::BackendInput input[] = {{seq.get(), prompt, engine::Logits::kLast}};
  const engine::PassLogits logits = backend.forward(input);
  const double pass_s = seconds_since(t0);
  const float first_logit = logits.rows(0).front();
  const ProcessMemory after_pass = own_process_memory();

  const uint64_t bound =
      static_cast<uint64_t>(1.15 * static_cast<double>(int8_bytes)) + (uint64_t{512} << 20);
  const gpu::vulkan::DeviceInfo& d = ctx->info();
  json report = {
      {"preset", o.preset},
      {"layers", config.num_layers},
      {"device", d.name},
      {"unified_memory", d.unified_memory},
      {"imports_host_memory", d.imports_host_memory},
      {"placement", o.placement},
      {"shares_host_weights", backend.shares_host_weights()},
      {"int8_bytes", int8_bytes},
      {"host_weight_bytes", host_weight_bytes},
      {"device_allocated_weight_bytes", backend.allocated_weight_bytes()},
      {"device_imported_weight_bytes", backend.imported_weight_bytes()},
      {"rss_at_start_bytes", at_start.rss_bytes},
      {"rss_after_weights_bytes", after_weights.rss_bytes},
      {"rss_after_backend_bytes", after_backend.rss_bytes},
      {"rss_after_pass_bytes", after_pass.rss_bytes},
      {"peak_rss_bytes", after_pass.hwm_bytes},
      {"bound_bytes", bound},
      {"within_bound", after_pass.hwm_bytes <= bound},
      {"build_weights_s", build_s},
      {"backend_s", backend_s},
      {"pass_s", pass_s},
      {"pass_tokens", o.tokens},
      {"first_logit_finite", std::isfinite(first_logit)},
  };
  if (o.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    std::printf(
        "stoa bench vulkan-memory: %s (%lld layers) on %s, %s weights (%s)\n"
        "  int8 bytes %.3f GB; peak RSS %.3f GB against the bound %.3f GB: %s\n"
        "  device allocations for weights %.3f GB, host pages imported %.3f GB\n"
        "  weights built %.1f s, backend %.1f s, one %d-token pass %.1f s\n",
        o.preset.c_str(), static_cast<long long>(config.num_layers), d.name.c_str(),
        o.placement.c_str(), backend.shares_host_weights() ? "shared with the host" : "mirrored",
        int8_bytes / 1e9, after_pass.hwm_bytes / 1e9, bound / 1e9,
        after_pass.hwm_bytes <= bound ? "within" : "OVER", backend.allocated_weight_bytes() / 1e9,
        backend.imported_weight_bytes() / 1e9, build_s, backend_s, o.tokens, pass_s);
  }
  return 0;
#endif
}

}  // namespace stoa::bench
