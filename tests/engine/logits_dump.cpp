// Not a test: writes the logits of a fixed greedy decode on the tiny presets (int8 weights, W8A8
// backend, one thread) as raw f32, one file per preset, so that two machines or two builds can be
// compared bit for bit with cmp (scripts/test-arm64: the aarch64 build under qemu-user against
// the x86 build). The prompt is prefilled as a batch (prefill path), then 6 tokens are decoded
// one at a time (decode path); every step's whole logit row is written.
//   engine_logits_dump OUT_DIR [--target NAME] [--arm-dot none|SDOT|SMMLA]
// --target forces one Highway target (its name as kernels::target_name gives it, e.g. AVX3_DL,
// AVX2, EMU128, NEON); --arm-dot caps the ARM int8 dot-product variant.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/model_runner.h"
#include "engine_test_util.h"
#include "kernels/matmul_int8_arm.h"
#include "kernels/targets.h"

namespace {

using namespace stoa;
using namespace stoa::engine;

int usage() {
  std::fprintf(stderr,
               "usage: engine_logits_dump OUT_DIR [--target NAME] [--arm-dot none|SDOT|SMMLA]\n");
  return 2;
}

bool force_named_target(const std::string& name) {
  for (int64_t t : kernels::available_targets()) {
    if (kernels::target_name(t) == name) {
      kernels::force_target(t);
      return true;
    }
  }
  return false;
}

bool force_named_dot(const std::string& name) {
  for (auto d :
       {kernels::ArmInt8Dot::kNone, kernels::ArmInt8Dot::kSdot, kernels::ArmInt8Dot::kSmmla}) {
    if (kernels::arm_int8_dot_name(d) == name) {
      kernels::force_arm_int8_dot(d);
      return kernels::arm_int8_dot() == d;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::filesystem::path out_dir = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--target" && !force_named_target(value)) {
      std::fprintf(stderr, "engine_logits_dump: target %s is not available here\n", value.c_str());
      return 3;
    }
    if (flag == "--arm-dot" && !force_named_dot(value)) {
      std::fprintf(stderr, "engine_logits_dump: int8 dot %s is not available here\n",
                   value.c_str());
      return 3;
    }
    if (flag != "--target" && flag != "--arm-dot") return usage();
  }
  std::filesystem::create_directories(out_dir);
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"}) {
    const ModelWeights w = testing::tiny_model(preset);
    ModelRunner runner = ModelRunner::from_model(w, WeightFormat::kInt8, nullptr);
    runner.set_backend(Backend::kW8A8);
    const int64_t vocab = runner.config().vocab_size;
    Sequence seq = runner.new_sequence(64);
    std::vector<int32_t> next = testing::random_tokens(13, vocab, 77);
    std::vector<float> logits;
    std::string tokens;
    for (int step = 0; step < 7; ++step) {
      const SequenceInput input{&seq, next, Logits::kLast};
      std::vector<Tensor> out = runner.append_batch(std::span<const SequenceInput>(&input, 1));
      const float* row = out[0].as<float>();
      logits.insert(logits.end(), row, row + vocab);
      int32_t best = 0;
      for (int64_t v = 1; v < vocab; ++v)
        if (row[v] > row[best]) best = static_cast<int32_t>(v);
      next = {best};
      tokens += " " + std::to_string(best);
    }
    std::ofstream f(out_dir / (std::string(preset) + ".f32"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(logits.data()),
            static_cast<std::streamsize>(logits.size() * sizeof(float)));
    std::printf("%s target %s int8-dot %s tokens%s\n", preset,
                kernels::target_name(kernels::active_target()).c_str(),
                kernels::arm_int8_dot_name(kernels::arm_int8_dot()).c_str(), tokens.c_str());
  }
  return 0;
}
