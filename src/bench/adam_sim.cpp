#include "bench/adam_sim.h"

#include <cmath>

#include "core/rng.h"

namespace stoa::pulse {

SimLayout sim_layout_100m() {
  return SimLayout{};
}

SimLayout sim_layout_tiny() {
  return SimLayout{512, 128, 256, 2, 4, 2, 32};
}

namespace {

// Two approximately standard normals per call: each is the sum of four 16-bit uniforms, centred
// and scaled (Irwin-Hall; tails end at +-3.5 sigma). Cheap enough to drive 100M-parameter AdamW
// steps, and reproducible bit for bit.
void normal_pair(uint64_t& s, float* a, float* b) {
  constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(12 / 4) per unit of 2^16
  uint64_t r1 = splitmix64(&s), r2 = splitmix64(&s);
  auto sum4 = [](uint64_t r) {
    return static_cast<float>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) +
                              (r >> 48));
  };
  *a = (sum4(r1) - 2.0f * 65535.0f) * kScale;
  *b = (sum4(r2) - 2.0f * 65535.0f) * kScale;
}

void fill_normal(float* out, int64_t n, uint64_t seed, float mean, float std) {
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i += 2) {
    float a, b;
    normal_pair(s, &a, &b);
    out[i] = mean + std * a;
    if (i + 1 < n) out[i + 1] = mean + std * b;
  }
}

uint64_t name_seed(const std::string& name, uint64_t seed) {
  uint64_t h = seed ^ 0x51ed2701a3c0ffeeull;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

}  // namespace

AdamSimulator::AdamSimulator(const SimLayout& layout, uint64_t seed, AdamSimOptions options)
    : layout_(layout), seed_(seed), options_(options) {
  init();
}

void AdamSimulator::init() {
  params_.clear();
  step_ = 0;
  const SimLayout& L = layout_;
  auto add = [&](const std::string& name, Shape shape, bool norm) {
    Param p;
    p.name = name;
    p.is_norm = norm;
    p.w = Tensor(DType::kF32, shape);
    p.m = Tensor(DType::kF32, shape);
    p.v = Tensor(DType::kF32, shape);
    if (norm)
      for (int64_t i = 0; i < p.w.numel(); ++i) p.w.as<float>()[i] = 1.0f;
    else
      fill_normal(p.w.as<float>(), p.w.numel(), name_seed(name, seed_), 0.0f, options_.init_std);
    params_.push_back(std::move(p));
  };
  add("model.embed_tokens.weight", {L.vocab, L.hidden}, false);
  add("model.norm.weight", {L.hidden}, true);
  for (int64_t l = 0; l < L.layers; ++l) {
    std::string p = cat("model.layers.", l, ".");
    add(p + "input_layernorm.weight", {L.hidden}, true);
    add(p + "post_attention_layernorm.weight", {L.hidden}, true);
    add(p + "self_attn.q_proj.weight", {L.heads * L.head_dim, L.hidden}, false);
    add(p + "self_attn.k_proj.weight", {L.kv_heads * L.head_dim, L.hidden}, false);
    add(p + "self_attn.v_proj.weight", {L.kv_heads * L.head_dim, L.hidden}, false);
    add(p + "self_attn.o_proj.weight", {L.hidden, L.heads * L.head_dim}, false);
    add(p + "self_attn.q_norm.weight", {L.head_dim}, true);
    add(p + "self_attn.k_norm.weight", {L.head_dim}, true);
    add(p + "mlp.gate_proj.weight", {L.intermediate, L.hidden}, false);
    add(p + "mlp.up_proj.weight", {L.intermediate, L.hidden}, false);
    add(p + "mlp.down_proj.weight", {L.hidden, L.intermediate}, false);
  }
}

void AdamSimulator::reset() {
  init();
}

void AdamSimulator::step(float lr) {
  ++step_;
  const AdamSimOptions& o = options_;
  float bc1 = 1.0f - std::pow(o.beta1, static_cast<float>(step_));
  float bc2 = 1.0f - std::pow(o.beta2, static_cast<float>(step_));
  for (Param& p : params_) {
    float* w = p.w.as<float>();
    float* m = p.m.as<float>();
    float* v = p.v.as<float>();
    int64_t n = p.w.numel();
    // Persistent component: a fixed per-element stream; noise: a fresh stream per step.
    uint64_t s_mean = name_seed(p.name, seed_ + 1);
    uint64_t s_noise = name_seed(p.name, seed_ + 1000003ull * static_cast<uint64_t>(step_));
    for (int64_t i = 0; i < n; i += 2) {
      float mu[2], nz[2];
      normal_pair(s_mean, &mu[0], &mu[1]);
      normal_pair(s_noise, &nz[0], &nz[1]);
      for (int k = 0; k < 2 && i + k < n; ++k) {
        int64_t j = i + k;
        float g = mu[k] + o.grad_noise * nz[k];
        m[j] = o.beta1 * m[j] + (1.0f - o.beta1) * g;
        v[j] = o.beta2 * v[j] + (1.0f - o.beta2) * g * g;
        float update = (m[j] / bc1) / (std::sqrt(v[j] / bc2) + o.eps);
        float decay = p.is_norm ? 0.0f : o.weight_decay * w[j];
        w[j] -= lr * (update + decay);
      }
    }
  }
}

WeightViews AdamSimulator::views() const {
  WeightViews out;
  for (const Param& p : params_) out.emplace(p.name, p.w.view());
  return out;
}

int64_t AdamSimulator::numel() const {
  int64_t n = 0;
  for (const Param& p : params_) n += p.w.numel();
  return n;
}

}  // namespace stoa::pulse
