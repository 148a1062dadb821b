// The policy's math (policy_math.h): blocks as functions of the tensors they are handed.
#include "train/policy_math.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace stoa::train {

PolicyLayer bind_policy_layer(const ModelConfig& c, const PolicyLayerLayout& names,
                              const std::function<torch::Tensor(const std::string&)>& pick) {
  auto pick_optional = [&](const std::string& name) {
    return name.empty() ? torch::Tensor() : pick(name);
  };
  PolicyLayer layer;
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
  return layer;
}

PolicyMath::PolicyMath(ModelConfig config, torch::Device device, torch::ScalarType compute)
    : config_(std::move(config)), device_(device), compute_(compute) {}

std::pair<torch::Tensor, torch::Tensor> PolicyMath::rope(int64_t T, bool any_attention) const {
  if (!any_attention) return {};
  const int64_t hd = config_.head_dim;
  // RoPE angles in double on the host, then f32, so every device sees the same table.
  torch::Tensor inv = torch::arange(0, hd / 2, torch::kFloat64)
                          .mul(-2.0 / static_cast<double>(hd) * std::log(config_.rope_theta))
                          .exp();
  torch::Tensor angle = torch::arange(0, T, torch::kFloat64).unsqueeze(1) * inv.unsqueeze(0);
  return {angle.cos().to(device_, torch::kFloat32).view({1, T, 1, hd / 2}),
          angle.sin().to(device_, torch::kFloat32).view({1, T, 1, hd / 2})};
}

torch::Tensor PolicyMath::embed(const torch::Tensor& table, const torch::Tensor& tokens) const {
  // .to: a LoRA base's table may be bf16 (a no-op for f32).
  return torch::embedding(table, tokens.to(device_, torch::kInt64)).to(torch::kFloat32);
}

torch::Tensor PolicyMath::block(const PolicyLayer& layer, const torch::Tensor& x,
                                const torch::Tensor& cos, const torch::Tensor& sin) const {
  torch::Tensor h = rms_norm(x, layer.op_norm);
  torch::Tensor y = x + (layer.attention ? attention(layer, h, cos, sin) : conv(layer, h));
  h = rms_norm(y, layer.ffn_norm);
  return y + (layer.moe ? moe(layer, h) : swiglu(h, layer.gate, layer.up, layer.down));
}

torch::Tensor PolicyMath::linear(const torch::Tensor& x, const torch::Tensor& w) const {
  // A LoRA base may be held in another dtype than the matmuls' (then the weight is cast).
  torch::Tensor y = compute_ == torch::kFloat32 && w.scalar_type() == torch::kFloat32
                        ? torch::matmul(x, w.t())
                        : torch::matmul(x.to(compute_), w.to(compute_).t()).to(torch::kFloat32);
  if (adapters_.empty()) return y;
  auto adapter = adapters_.find(w.unsafeGetTensorImpl());
  if (adapter == adapters_.end()) return y;
  const LoraAdapter& a = adapter->second;
  torch::Tensor in = x;
  if (a.dropout > 0 && torch::GradMode::is_enabled()) in = torch::dropout(x, a.dropout, true);
  return y + linear(linear(in, a.a), a.b) * a.scale;
}

torch::Tensor PolicyMath::rms_norm(const torch::Tensor& x, const torch::Tensor& w) const {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + config_.rms_norm_eps) * w;
}

torch::Tensor PolicyMath::swiglu(const torch::Tensor& x, const torch::Tensor& gate,
                                 const torch::Tensor& up, const torch::Tensor& down) const {
  return linear(torch::silu(linear(x, gate)) * linear(x, up), down);
}

torch::Tensor PolicyMath::attention(const PolicyLayer& layer, const torch::Tensor& x,
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

torch::Tensor PolicyMath::conv(const PolicyLayer& layer, const torch::Tensor& x) const {
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

torch::Tensor PolicyMath::moe(const PolicyLayer& layer, const torch::Tensor& x) const {
  const int64_t H = config_.hidden_size, E = config_.num_experts;
  const int64_t k = config_.num_experts_per_tok;
  torch::Tensor flat = x.reshape({-1, H});
  // Routing in f32 whatever the compute dtype: bf16 scores would flip expert choices.
  torch::Tensor scores =
      torch::sigmoid(torch::matmul(flat, layer.router.to(torch::kFloat32).t()));  // [N, E]
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

}  // namespace stoa::train
