#include "gpu/vulkan/golden_passes.h"

#include <cstring>
#include <exception>
#include <vector>

#include "core/error.h"
#include "engine/model_runner.h"
#include "gpu/vulkan/vulkan_backend.h"
#include "model/presets.h"
#include "model/weights.h"

namespace stoa::gpu::vulkan {
namespace {

using engine::BackendInput;
using engine::EngineBackend;
using engine::Logits;

// A fixed script of passes; every logit row of every pass, appended to `out`.
void run_script(EngineBackend& backend, std::vector<float>& out) {
  const auto V = static_cast<int32_t>(backend.config().vocab_size);
  auto tokens = [V](int n, int32_t salt) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back((i * 7919 + salt * 104729) % V);
    return t;
  };
  auto keep = [&out](const engine::PassLogits& l) {
    for (size_t i = 0; i < l.size(); ++i) out.insert(out.end(), l.rows(i).begin(), l.rows(i).end());
  };
  std::unique_ptr<engine::SequenceState> a = backend.new_state(64), b = backend.new_state(64);
  const std::vector<int32_t> pa = tokens(19, 1), pb = tokens(6, 2);
  const BackendInput first[] = {{a.get(), pa, Logits::kAll}, {b.get(), pb, Logits::kLast}};
  keep(backend.forward(first));
  std::unique_ptr<engine::SequenceState> f = a->fork_state();
  const std::vector<int32_t> one = tokens(1, 3), turn = tokens(9, 4);
  const BackendInput second[] = {{f.get(), one, Logits::kLast}, {b.get(), turn, Logits::kAll}};
  keep(backend.forward(second));
  const BackendInput third[] = {
      {a.get(), one, Logits::kLast}, {b.get(), one, Logits::kLast}, {f.get(), one, Logits::kLast}};
  keep(backend.forward(third));
}

}  // namespace

SelfTestResult run_golden_passes(const std::shared_ptr<Context>& ctx) {
  SelfTestResult kernels = run_v2_self_test(*ctx);
  if (!kernels.passed) return kernels;
  const std::string device = ctx->info().name;
  try {
    for (const char* preset : {"tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"}) {
      const ModelWeights w = random_weights(preset_config(preset), 20261207, 0.08f);
      engine::ModelRunner cpu(engine::EngineWeights::from_model(w, engine::WeightFormat::kInt8));
      VulkanBackend gpu(ctx,
                        std::make_unique<engine::EngineWeights>(
                            engine::EngineWeights::from_model(w, engine::WeightFormat::kInt8)));
      std::vector<float> want, got;
      run_script(cpu, want);
      run_script(gpu, got);
      if (want.size() != got.size())
        return {false, cat("golden passes on ", device, ": ", preset, " made ", got.size(),
                           " logits, the CPU engine ", want.size())};
      for (size_t i = 0; i < want.size(); ++i) {
        uint32_t wb = 0, gb = 0;
        std::memcpy(&wb, &want[i], 4);
        std::memcpy(&gb, &got[i], 4);
        if (wb != gb)
          return {false,
                  cat("golden passes on ", device, ": ", preset, " logit ", i,
                      " differs from the CPU engine's (", got[i], " against ", want[i], ")")};
      }
    }
  } catch (const std::exception& e) {
    return {false, cat("golden passes on ", device, " failed: ", e.what())};
  }
  return {true, cat(kernels.report,
                    "; whole passes of Qwen3, LFM2 and LFM2-MoE equal the CPU "
                    "engine's bit for bit")};
}

}  // namespace stoa::gpu::vulkan
