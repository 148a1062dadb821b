// The generic part of the policy: parameters, the blocks and the forward pass. Which tensor fills
// which slot of a layer comes from the architecture's file under train/models/ (torch-free, by
// tensor role), so no name of a tensor is spelled here.
#include "train/policy_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "core/error.h"
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
                         torch::ScalarType compute)
    : config_(weights.config), device_(device), compute_(compute) {
  const ModelConfig& c = config_;
  STOA_CHECK(c.num_layers > 0 && c.hidden_size > 0 && c.vocab_size > 0 && c.num_heads > 0 &&
                 c.num_kv_heads > 0 && c.head_dim > 0 && c.num_heads % c.num_kv_heads == 0 &&
                 static_cast<int64_t>(c.layer_kinds.size()) == c.num_layers,
             ErrorKind::kInvalidArgument, "the ", arch_name(c.arch),
             " config is incomplete or inconsistent (layers, heads, head_dim, layer_kinds)");
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : weights.tensors) {
    torch::Tensor t = to_torch(tensor);
    STOA_CHECK(t.is_floating_point(), ErrorKind::kBadFormat, "tensor ", name,
               " is not a float tensor (", dtype_name(tensor.dtype()), ")");
    t = t.to(device_, torch::kFloat32).contiguous();
    index_[name] = params_.size();
    names_.push_back(name);
    params_.push_back(t);
  }

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
  auto pick_optional = [&](const std::string& name) {
    return name.empty() ? torch::Tensor() : pick(name);
  };
  embed_ = pick(layout.embedding);
  final_norm_ = pick(layout.final_norm);
  lm_head_ = c.tie_word_embeddings ? embed_ : pick(layout.lm_head);
  for (const PolicyLayerLayout& names : layout.layers) {
    Layer layer;
    layer.attention = names.attention;
    layer.moe = names.moe;
    layer.op_norm = pick(names.mixer_norm);
    layer.ffn_norm = pick(names.ffn_norm);
    if (layer.attention) {
      layer.q = pick(names.q);
      layer.k = pick(names.k);
      layer.v = pick(names.v);
      layer.o = pick(names.o);
      layer.q_norm = pick(names.q_norm);
      layer.k_norm = pick(names.k_norm);
    } else {
      layer.conv_in = pick(names.conv_in);
      layer.conv_in_bias = pick_optional(names.conv_in_bias);
      layer.conv_w = pick(names.conv_kernel);
      layer.conv_bias = pick_optional(names.conv_bias);
      layer.conv_out = pick(names.conv_out);
      layer.conv_out_bias = pick_optional(names.conv_out_bias);
      STOA_CHECK(layer.conv_w.numel() == c.hidden_size * c.conv_kernel, ErrorKind::kBadFormat,
                 "tensor ", names.conv_kernel, " has ", layer.conv_w.numel(),
                 " elements; expected hidden_size x conv_kernel = ", c.hidden_size * c.conv_kernel);
    }
    if (layer.moe) {
      layer.router = pick(names.router);
      layer.expert_bias = pick_optional(names.expert_bias);
      for (size_t e = 0; e < names.expert_gate.size(); ++e) {
        layer.e_gate.push_back(pick(names.expert_gate[e]));
        layer.e_up.push_back(pick(names.expert_up[e]));
        layer.e_down.push_back(pick(names.expert_down[e]));
      }
    } else {
      layer.gate = pick(names.gate);
      layer.up = pick(names.up);
      layer.down = pick(names.down);
    }
    layers_.push_back(std::move(layer));
  }
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
    params_[i].set_requires_grad(!frozen.count(names_[i]));
}

const torch::Tensor& PolicyModel::parameter(const std::string& name) const {
  auto it = index_.find(name);
  STOA_CHECK(it != index_.end(), ErrorKind::kNotFound, "the policy has no tensor ", name);
  return params_[it->second];
}

torch::Tensor PolicyModel::linear(const torch::Tensor& x, const torch::Tensor& w) const {
  if (compute_ == torch::kFloat32) return torch::matmul(x, w.t());
  return torch::matmul(x.to(compute_), w.to(compute_).t()).to(torch::kFloat32);
}

torch::Tensor PolicyModel::rms_norm(const torch::Tensor& x, const torch::Tensor& w) const {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + config_.rms_norm_eps) * w;
}

torch::Tensor PolicyModel::swiglu(const torch::Tensor& x, const torch::Tensor& gate,
                                  const torch::Tensor& up, const torch::Tensor& down) const {
  return linear(torch::silu(linear(x, gate)) * linear(x, up), down);
}

torch::Tensor PolicyModel::attention(const Layer& layer, const torch::Tensor& x,
                                     const torch::Tensor& cos, const torch::Tensor& sin) const {
  const int64_t B = x.size(0), T = x.size(1);
  const int64_t nh = config_.num_heads, nkv = config_.num_kv_heads, hd = config_.head_dim;
  const int64_t half = hd / 2;
  auto rope = [&](const torch::Tensor& t) {  // rotate-half RoPE on [B, T, heads, hd]
    torch::Tensor a = t.slice(-1, 0, half), b = t.slice(-1, half, hd);
    return torch::cat({a * cos - b * sin, b * cos + a * sin}, -1);
  };
  torch::Tensor q = rope(rms_norm(linear(x, layer.q).view({B, T, nh, hd}), layer.q_norm));
  torch::Tensor k = rope(rms_norm(linear(x, layer.k).view({B, T, nkv, hd}), layer.k_norm));
  torch::Tensor v = linear(x, layer.v).view({B, T, nkv, hd});
  q = q.transpose(1, 2);  // [B, nh, T, hd]
  k = k.transpose(1, 2);
  v = v.transpose(1, 2);
  if (nh != nkv) {  // GQA: query head h reads kv head h / (nh / nkv)
    const int64_t rep = nh / nkv;
    k = k.unsqueeze(2).expand({B, nkv, rep, T, hd}).reshape({B, nh, T, hd});
    v = v.unsqueeze(2).expand({B, nkv, rep, T, hd}).reshape({B, nh, T, hd});
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  torch::Tensor scores =
      (compute_ == torch::kFloat32)
          ? torch::matmul(q, k.transpose(-2, -1))
          : torch::matmul(q.to(compute_), k.to(compute_).transpose(-2, -1)).to(torch::kFloat32);
  scores = scores * scale;
  torch::Tensor causal =
      torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
  scores = scores.masked_fill(causal, -std::numeric_limits<float>::infinity());
  torch::Tensor probs = torch::softmax(scores, -1);
  torch::Tensor out = (compute_ == torch::kFloat32)
                          ? torch::matmul(probs, v)
                          : torch::matmul(probs.to(compute_), v.to(compute_)).to(torch::kFloat32);
  out = out.transpose(1, 2).reshape({B, T, nh * hd});
  return linear(out, layer.o);
}

torch::Tensor PolicyModel::conv(const Layer& layer, const torch::Tensor& x) const {
  const int64_t T = x.size(1), H = config_.hidden_size, L = config_.conv_kernel;
  torch::Tensor bcx = linear(x, layer.conv_in);
  if (layer.conv_in_bias.defined()) bcx = bcx + layer.conv_in_bias;
  std::vector<torch::Tensor> parts = bcx.chunk(3, -1);  // B, C, x
  torch::Tensor bx = parts[0] * parts[2];
  // Depthwise causal conv over time: out[t] = Σ_j w[j] · bx[t + j − (L−1)], zero before t = 0.
  torch::Tensor w = layer.conv_w.reshape({H, L});
  torch::Tensor padded = torch::constant_pad_nd(bx, {0, 0, L - 1, 0}, 0);
  torch::Tensor out = padded.slice(1, 0, T) * w.select(1, 0);
  for (int64_t j = 1; j < L; ++j) out = out + padded.slice(1, j, j + T) * w.select(1, j);
  if (layer.conv_bias.defined()) out = out + layer.conv_bias;
  torch::Tensor y = linear(parts[1] * out, layer.conv_out);
  if (layer.conv_out_bias.defined()) y = y + layer.conv_out_bias;
  return y;
}

torch::Tensor PolicyModel::moe(const Layer& layer, const torch::Tensor& x) const {
  const int64_t H = config_.hidden_size, E = config_.num_experts;
  const int64_t k = config_.num_experts_per_tok;
  torch::Tensor flat = x.reshape({-1, H});
  // Routing in f32 whatever the compute dtype: bf16 scores would flip expert choices.
  torch::Tensor scores = torch::sigmoid(torch::matmul(flat, layer.router.t()));  // [N, E]
  torch::Tensor choice = scores.detach();
  if (layer.expert_bias.defined()) choice = choice + layer.expert_bias.detach();
  torch::Tensor idx = std::get<1>(torch::topk(choice, k, -1));  // [N, k]
  torch::Tensor w = scores.gather(1, idx);                      // the scores without the bias
  if (config_.norm_topk_prob) w = w / (w.sum(-1, /*keepdim=*/true) + 1e-20);
  if (config_.routed_scaling_factor != 1.0) w = w * config_.routed_scaling_factor;
  // Group the (token, slot) pairs by expert, run each expert once on its tokens, add back.
  torch::Tensor flat_e = idx.reshape({-1});
  torch::Tensor order = torch::argsort(flat_e);
  torch::Tensor counts = torch::bincount(flat_e, {}, E).to(torch::kCPU);
  torch::Tensor token_of = torch::div(order, k, "floor");
  torch::Tensor weight_of = w.reshape({-1}).index_select(0, order);
  torch::Tensor out = torch::zeros_like(flat);
  const int64_t* count = counts.data_ptr<int64_t>();
  int64_t offset = 0;
  for (int64_t e = 0; e < E; ++e) {
    if (count[e] == 0) continue;
    torch::Tensor tokens = token_of.slice(0, offset, offset + count[e]);
    torch::Tensor y =
        swiglu(flat.index_select(0, tokens), layer.e_gate[e], layer.e_up[e], layer.e_down[e]);
    out = out.index_add(0, tokens, y * weight_of.slice(0, offset, offset + count[e]).unsqueeze(1));
    offset += count[e];
  }
  return out.view(x.sizes());
}

torch::Tensor PolicyModel::hidden(const torch::Tensor& tokens) const {
  STOA_CHECK(tokens.dim() == 2, ErrorKind::kInternal, "hidden() wants [B, T] tokens");
  const int64_t T = tokens.size(1), hd = config_.head_dim;
  torch::Tensor x = torch::embedding(embed_, tokens.to(device_, torch::kInt64));
  torch::Tensor cos, sin;
  if (std::any_of(layers_.begin(), layers_.end(), [](const Layer& l) { return l.attention; })) {
    // RoPE angles in double on the host, then f32, so every device sees the same table.
    torch::Tensor inv = torch::arange(0, hd / 2, torch::kFloat64)
                            .mul(-2.0 / static_cast<double>(hd) * std::log(config_.rope_theta))
                            .exp();
    torch::Tensor angle = torch::arange(0, T, torch::kFloat64).unsqueeze(1) * inv.unsqueeze(0);
    cos = angle.cos().to(device_, torch::kFloat32).view({1, T, 1, hd / 2});
    sin = angle.sin().to(device_, torch::kFloat32).view({1, T, 1, hd / 2});
  }
  for (const Layer& layer : layers_) {
    torch::Tensor h = rms_norm(x, layer.op_norm);
    x = x + (layer.attention ? attention(layer, h, cos, sin) : conv(layer, h));
    h = rms_norm(x, layer.ffn_norm);
    x = x + (layer.moe ? moe(layer, h) : swiglu(h, layer.gate, layer.up, layer.down));
  }
  return rms_norm(x, final_norm_);
}

torch::Tensor PolicyModel::logits(const torch::Tensor& hidden_states) const {
  return linear(hidden_states, lm_head_);
}

void PolicyModel::copy_to(ModelWeights* out) const {
  out->config = config_;
  for (size_t i = 0; i < names_.size(); ++i) {
    torch::Tensor host = params_[i].detach().to(torch::kCPU, torch::kFloat32).contiguous();
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
    params_[i].copy_(t.to(torch::kFloat32));
  }
}

}  // namespace stoa::train
