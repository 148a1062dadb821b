// The generic part of the policy: parameters, the blocks and the forward pass. Which tensor fills
// which slot of a layer comes from the architecture's file under train/models/ (torch-free, by
// tensor role), so no name of a tensor is spelled here.
#include "train/policy_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/rng.h"
#include "model/tensor_source.h"
#include "train/models/policy_layout.h"

namespace stoa::train {

torch::ScalarType torch_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return torch::kFloat32;
    case DType::kBF16:
      return torch::kBFloat16;
    case DType::kF16:
      return torch::kFloat16;
    case DType::kI8:
      return torch::kInt8;
    case DType::kU8:
      return torch::kUInt8;
    case DType::kI32:
      return torch::kInt32;
    case DType::kI64:
      return torch::kInt64;
  }
  fail(ErrorKind::kUnsupported, "dtype ", dtype_name(dtype), " has no libtorch equivalent");
}

torch::Tensor to_torch(const Tensor& tensor) {
  std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
  if (tensor.dtype() == DType::kBF16 || tensor.dtype() == DType::kF16) {
    Tensor f32 = to_f32(tensor.view());
    return torch::from_blob(const_cast<void*>(f32.data()), shape, torch::kFloat32).clone();
  }
  return torch::from_blob(const_cast<void*>(tensor.data()), shape, torch_dtype(tensor.dtype()))
      .clone();
}

Tensor from_torch(const torch::Tensor& tensor) {
  torch::Tensor host = tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  Shape shape(host.sizes().begin(), host.sizes().end());
  Tensor out(DType::kF32, shape);
  std::memcpy(out.data(), host.data_ptr<float>(), out.nbytes());
  return out;
}

PolicyModel::PolicyModel(const ModelWeights& weights, torch::Device device,
                         torch::ScalarType compute, const LoraOptions& lora, uint64_t seed)
    : config_(weights.config),
      device_(device),
      math_(weights.config, device, compute),
      lora_(lora) {
  validate_lora_options(lora_);
  for (const auto& [name, tensor] : weights.tensors) add_parameter(name, tensor);
  bind();
  add_adapters(seed);
}

PolicyModel::PolicyModel(const TensorSource& source, torch::Device device,
                         torch::ScalarType compute, const LoraOptions& lora, uint64_t seed)
    : config_(source.config()),
      device_(device),
      math_(source.config(), device, compute),
      lora_(lora) {
  validate_lora_options(lora_);
  // Name order, as the map of ModelWeights gives it: the optimiser's parameter order (and so
  // its checkpoint) does not depend on where the weights came from.
  std::vector<const TensorSpec*> specs;
  for (const TensorSpec& spec : source.specs()) specs.push_back(&spec);
  std::sort(specs.begin(), specs.end(),
            [](const TensorSpec* a, const TensorSpec* b) { return a->name < b->name; });
  for (const TensorSpec* spec : specs) add_parameter(spec->name, source.f32(*spec));
  bind();
  add_adapters(seed);
}

void PolicyModel::add_parameter(const std::string& name, const Tensor& tensor) {
  torch::NoGradGuard no_grad;
  torch::Tensor t = to_torch(tensor);
  STOA_CHECK(t.is_floating_point(), ErrorKind::kBadFormat, "tensor ", name,
             " is not a float tensor (", dtype_name(tensor.dtype()), ")");
  // LoRA: the frozen base in its own dtype (bf16 halves it); else the f32 masters.
  const torch::ScalarType dtype =
      lora_.enabled() ? torch_dtype(lora_.base_dtype) : torch::ScalarType(torch::kFloat32);
  t = t.to(device_, dtype).contiguous();
  index_[name] = params_.size();
  names_.push_back(name);
  params_.push_back(t);
}

void PolicyModel::bind() {
  const ModelConfig& c = config_;
  STOA_CHECK(c.num_layers > 0 && c.hidden_size > 0 && c.vocab_size > 0 && c.num_heads > 0 &&
                 c.num_kv_heads > 0 && c.head_dim > 0 && c.num_heads % c.num_kv_heads == 0 &&
                 static_cast<int64_t>(c.layer_kinds.size()) == c.num_layers,
             ErrorKind::kInvalidArgument, "the ", arch_name(c.arch),
             " config is incomplete or inconsistent (layers, heads, head_dim, layer_kinds)");
  torch::NoGradGuard no_grad;
  // Which tensor fills which slot: the architecture's file under train/models/, by role.
  const PolicyLayout layout = policy_layout(c);
  std::set<std::string> used;
  auto pick = [&](const std::string& name) {
    auto it = index_.find(name);
    if (it == index_.end())
      fail(ErrorKind::kBadFormat, "the ", arch_name(c.arch), " weights lack tensor ", name);
    used.insert(name);
    return params_[it->second];
  };
  embed_ = pick(layout.embedding);
  final_norm_ = pick(layout.final_norm);
  lm_head_ = c.tie_word_embeddings ? embed_ : pick(layout.lm_head);
  for (const PolicyLayerLayout& names : layout.layers)
    layers_.push_back(bind_policy_layer(c, names, pick));
  for (const std::string& name : names_) {
    STOA_CHECK(used.count(name), ErrorKind::kBadFormat, "tensor ", name, " is not part of the ",
               arch_name(c.arch), " architecture");
  }
  STOA_CHECK(embed_.dim() == 2 && embed_.size(0) == c.vocab_size && embed_.size(1) == c.hidden_size,
             ErrorKind::kBadFormat, "model.embed_tokens.weight has shape ", embed_.sizes(),
             "; expected [", c.vocab_size, ", ", c.hidden_size, "]");
  // The MoE expert bias steers routing only (top-k indices carry no gradient); HF keeps it as a
  // buffer, so it is not trained here either.
  std::set<std::string> frozen;
  for (const PolicyLayerLayout& names : layout.layers) {
    if (!names.expert_bias.empty()) frozen.insert(names.expert_bias);
  }
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i].set_requires_grad(!lora_.enabled() && !frozen.count(names_[i]));
}

void PolicyModel::add_adapters(uint64_t seed) {
  if (!lora_.enabled()) return;
  torch::NoGradGuard no_grad;
  std::unordered_map<const void*, LoraAdapter> by_weight;
  // One stream of the seed for all of A, in target order: the same init on every machine.
  Rng rng(seed, 0x4c6f5241);  // "LoRA"
  for (const LoraTarget& t : lora_targets(config_, lora_)) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(t.in));
    std::vector<float> a(static_cast<size_t>(lora_.rank * t.in));
    for (float& v : a) v = (2.0f * rng.uniform_float() - 1.0f) * bound;
    torch::Tensor A = torch::from_blob(a.data(), {lora_.rank, t.in}, torch::kFloat32)
                          .clone()
                          .to(device_)
                          .set_requires_grad(true);
    torch::Tensor B = torch::zeros({t.out, lora_.rank},
                                   torch::TensorOptions().dtype(torch::kFloat32).device(device_))
                          .set_requires_grad(true);
    adapter_of_[t.weight] = {adapters_.size(), adapters_.size() + 1};
    adapter_names_.push_back(lora_a_name(t));
    adapters_.push_back(A);
    adapter_names_.push_back(lora_b_name(t));
    adapters_.push_back(B);
    by_weight[parameter(t.weight).unsafeGetTensorImpl()] = {A, B, lora_.scale(), lora_.dropout};
  }
  math_.set_adapters(std::move(by_weight));
  if (!lora_.init_adapter.empty()) load_peft_adapter(lora_.init_adapter);
}

torch::Tensor PolicyModel::merged(const std::string& name) const {
  torch::NoGradGuard no_grad;
  torch::Tensor w = parameter(name).to(torch::kFloat32);
  auto adapter = adapter_of_.find(name);
  if (adapter == adapter_of_.end()) return w;
  const torch::Tensor& A = adapters_[adapter->second.first];
  const torch::Tensor& B = adapters_[adapter->second.second];
  return w + torch::matmul(B, A) * lora_.scale();
}

Hash128 PolicyModel::parameters_hash() const {
  StateHasher hasher;
  for (size_t i = 0; i < names_.size(); ++i) {
    torch::Tensor host = params_[i].detach().to(torch::kCPU).contiguous();
    DType dtype = DType::kF32;
    if (host.scalar_type() == torch::kBFloat16) dtype = DType::kBF16;
    if (host.scalar_type() == torch::kFloat16) dtype = DType::kF16;
    hasher.add(names_[i],
               TensorView(host.data_ptr(), dtype, Shape(host.sizes().begin(), host.sizes().end())));
  }
  return hasher.finish();
}

const torch::Tensor& PolicyModel::parameter(const std::string& name) const {
  auto it = index_.find(name);
  STOA_CHECK(it != index_.end(), ErrorKind::kNotFound, "the policy has no tensor ", name);
  return params_[it->second];
}

torch::Tensor PolicyModel::hidden(const torch::Tensor& tokens) const {
  STOA_CHECK(tokens.dim() == 2, ErrorKind::kInternal, "hidden() wants [B, T] tokens");
  const bool attends =
      std::any_of(layers_.begin(), layers_.end(), [](const PolicyLayer& l) { return l.attention; });
  auto [cos, sin] = math_.rope(tokens.size(1), attends);
  torch::Tensor x = math_.embed(embed_, tokens);
  for (const PolicyLayer& layer : layers_) x = math_.block(layer, x, cos, sin);
  return math_.rms_norm(x, final_norm_);
}

torch::Tensor PolicyModel::logits(const torch::Tensor& hidden_states) const {
  return math_.linear(hidden_states, lm_head_);
}

void PolicyModel::copy_to(ModelWeights* out) const {
  out->config = config_;
  for (size_t i = 0; i < names_.size(); ++i) {
    torch::Tensor host = (lora() ? merged(names_[i]) : params_[i].detach())
                             .to(torch::kCPU, torch::kFloat32)
                             .contiguous();
    Shape shape(host.sizes().begin(), host.sizes().end());
    auto it = out->tensors.find(names_[i]);
    if (it == out->tensors.end() || it->second.dtype() != DType::kF32 ||
        it->second.shape() != shape) {
      out->tensors.insert_or_assign(names_[i], Tensor(DType::kF32, shape));
      it = out->tensors.find(names_[i]);
    }
    std::memcpy(it->second.data(), host.data_ptr<float>(), it->second.nbytes());
  }
}

void PolicyModel::load(const ModelWeights& weights) {
  torch::NoGradGuard no_grad;
  STOA_CHECK(weights.tensors.size() == names_.size(), ErrorKind::kBadFormat, "the weights have ",
             weights.tensors.size(), " tensors; the policy has ", names_.size());
  for (size_t i = 0; i < names_.size(); ++i) {
    auto found = weights.tensors.find(names_[i]);
    STOA_CHECK(found != weights.tensors.end(), ErrorKind::kNotFound, "the weights lack tensor ",
               names_[i]);
    const Tensor& source = found->second;
    torch::Tensor t = to_torch(source);
    STOA_CHECK(t.sizes() == params_[i].sizes(), ErrorKind::kBadFormat, "tensor ", names_[i],
               " has shape ", shape_string(source.shape()), "; the policy has ",
               params_[i].sizes());
    params_[i].copy_(t.to(params_[i].scalar_type()));
  }
}

}  // namespace stoa::train
