// ModelWeights lookup, the expected tensor list (from the registry) and seeded random init.
#include "model/weights.h"

#include <cmath>
#include <cstring>

#include "core/hash.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "model/arch_registry.h"

namespace stoa {

const Tensor& ModelWeights::at(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) {
    fail(ErrorKind::kNotFound, "tensor '", name, "' is not in the ", arch_name(config.arch),
         " weights");
  }
  return it->second;
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& config) {
  std::vector<TensorSpec> specs;
  for (TensorSlot& slot : tensor_slots(config)) specs.push_back({std::move(slot.name), slot.shape});
  return specs;
}

namespace {

bool ends_with(const std::string& text, const char* suffix) {
  size_t n = std::strlen(suffix);
  return text.size() >= n && text.compare(text.size() - n, n, suffix) == 0;
}

// What a tensor is initialised to, from its name: the registry's names are the contract.
enum class InitKind { kNormal, kOnes, kExpertBias };

InitKind init_kind(const TensorSpec& spec) {
  if (ends_with(spec.name, "expert_bias")) return InitKind::kExpertBias;
  // RMSNorm weights are the only 1-D ".weight" tensors (biases end in ".bias").
  if (spec.shape.size() == 1 && ends_with(spec.name, ".weight")) return InitKind::kOnes;
  return InitKind::kNormal;
}

// The routing bias must be non-zero for tests to see it act, and small next to the sigmoid
// scores (0..1) so routing still depends on the input.
constexpr float kExpertBiasStd = 0.05f;

}  // namespace

Tensor random_tensor(const TensorSpec& spec, uint64_t seed, float std) {
  Tensor tensor(DType::kF32, spec.shape);
  float* data = tensor.as<float>();
  size_t n = static_cast<size_t>(shape_numel(spec.shape));
  switch (init_kind(spec)) {
    case InitKind::kOnes:
      for (size_t i = 0; i < n; ++i) data[i] = 1.0f;
      break;
    case InitKind::kNormal:
    case InitKind::kExpertBias: {
      float scale = init_kind(spec) == InitKind::kExpertBias ? kExpertBiasStd : std;
      // One independent stream per tensor, seeded from (seed, name): the values of a tensor do
      // not depend on which other tensors exist, on the order they are made in, or on the thread.
      Hash128 name_hash = hash_bytes(spec.name.data(), spec.name.size());
      NormalRng rng(seed ^ name_hash.low, name_hash.high);
      for (size_t i = 0; i < n; ++i) data[i] = scale * rng.next_float();
      break;
    }
  }
  return tensor;
}

ModelWeights random_weights(const ModelConfig& config, uint64_t seed, float std) {
  validate_model_config(config, "random_weights config");
  std::vector<TensorSpec> specs = expected_tensors(config);
  ModelWeights weights;
  weights.config = config;
  std::vector<Tensor> made(specs.size());
  ThreadPool& pool = ThreadPool::global();
  pool.run(static_cast<int>(specs.size()), [&](int index) {
    made[static_cast<size_t>(index)] = random_tensor(specs[static_cast<size_t>(index)], seed, std);
  });
  for (size_t k = 0; k < specs.size(); ++k)
    weights.tensors.emplace(specs[k].name, std::move(made[k]));
  return weights;
}

}  // namespace stoa
