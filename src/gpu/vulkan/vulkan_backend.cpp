#include "gpu/vulkan/vulkan_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/page_aligned.h"
#include "engine/ops.h"
#include "kernels/matmul_int8.h"
#include "model/tensor_roles.h"

namespace stoa::gpu::vulkan {
namespace {

constexpr int64_t kBlock = kernels::kQ8Block;

uint32_t u32(int64_t v) {
  return static_cast<uint32_t>(v);
}

size_t floats(int64_t n) {
  return static_cast<size_t>(n) * sizeof(float);
}

// Copies the int8 grid of `linear` into the device matrix's mapped buffers (same shape).
void fill(Context& ctx, DeviceQ8Matrix& m, const engine::Linear& linear) {
  if (m.values.data() != nullptr && m.scales.data() != nullptr) {
    std::memset(m.scales.data(), 0, m.scales.size());
    linear.int8_rows(0, linear.rows(), static_cast<int8_t*>(m.values.data()),
                     static_cast<uint16_t*>(m.scales.data()));
    return;
  }
  // Memory only the device reaches: rows in pieces of about one staging buffer, so the host
  // holds one piece beside its own copy, never a second whole matrix.
  const int64_t rows = linear.rows(), cols = linear.cols();
  const int64_t piece = std::max<int64_t>(1, static_cast<int64_t>(ctx.staging_bytes()) / cols);
  std::vector<int8_t> values;
  std::vector<uint16_t> scales;
  for (int64_t r0 = 0; r0 < rows; r0 += piece) {
    const int64_t r1 = std::min(rows, r0 + piece);
    values.resize(static_cast<size_t>((r1 - r0) * cols));
    scales.resize(static_cast<size_t>((r1 - r0) * cols / kBlock));
    linear.int8_rows(r0, r1, values.data(), scales.data());
    ctx.write(m.values, static_cast<size_t>(r0 * cols), values.data(), values.size());
    ctx.write(m.scales, static_cast<size_t>(r0 * cols / kBlock) * sizeof(uint16_t), scales.data(),
              scales.size() * sizeof(uint16_t));
  }
  // The scales' padding to a whole word, which the shader reads.
  const size_t used = static_cast<size_t>(rows * cols / kBlock) * sizeof(uint16_t);
  const std::vector<uint8_t> zeros(m.scales.size() - used, 0);
  ctx.write(m.scales, used, zeros.data(), zeros.size());
}

}  // namespace

std::string VulkanBackend::unsupported(const engine::EngineWeights& weights) {
  const ModelConfig& c = weights.config();
  if (c.arch != Arch::kQwen3 && c.arch != Arch::kLfm2 && c.arch != Arch::kLfm2Moe)
    return cat("the Vulkan backend has no ", arch_name(c.arch), " pass");
  if (c.arch == Arch::kLfm2Moe &&
      !(c.num_experts > 0 && c.num_experts_per_tok > 0 && c.num_experts_per_tok <= c.num_experts))
    return cat("LFM2-MoE needs 0 < num_experts_per_tok (", c.num_experts_per_tok,
               ") <= num_experts (", c.num_experts, ")");
  if (c.arch != Arch::kQwen3 && (c.conv_bias || c.conv_kernel < 1))
    return "the Vulkan backend has no LFM2 conv with a bias or an empty kernel";
  if (weights.format() != engine::WeightFormat::kInt8)
    return cat("the Vulkan backend computes int8 weights (W8A8); these are ",
               engine::weight_format_name(weights.format()));
  if (!weights.span().whole(c))
    return cat("the Vulkan backend computes whole models; these weights are ",
               span_string(c, weights.span()));
  if (c.hidden_size % kBlock != 0 || (c.num_heads * c.head_dim) % kBlock != 0 ||
      c.head_dim % 2 != 0 || c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0)
    return "the model's shape does not fit the W8A8 pass";
  return {};
}

VulkanBackend::VulkanBackend(std::shared_ptr<Context> ctx,
                             std::unique_ptr<engine::EngineWeights>&& weights,
                             WeightPlacement placement)
    : ctx_(std::move(ctx)),
      // The grid's pages (core/page_aligned.h) must be whole units of the driver's import.
      share_(placement == WeightPlacement::kShareWhereUnified && ctx_->info().imports_host_memory &&
             kHostPageAlignment % ctx_->info().import_alignment == 0),
      matvec_(*ctx_),
      quantize_(*ctx_),
      rows_(*ctx_),
      attention_(*ctx_),
      ops_(*ctx_),
      conv_(*ctx_),
      pass_(*ctx_) {
  STOA_CHECK(weights != nullptr, ErrorKind::kInvalidArgument, "the Vulkan backend needs weights");
  const std::string why_not = unsupported(*weights);
  STOA_CHECK(why_not.empty(), ErrorKind::kUnsupported, why_not);
  // Taken now, handed back if the device fails below: the members' destructors free what was
  // uploaded, the host weights stay the caller's.
  weights_ = std::move(weights);
  try {
    upload_weights();
  } catch (...) {
    weights = std::move(weights_);
    throw;
  }
}

void VulkanBackend::upload_weights() {
  const engine::Linear* head = &weights_->lm_head();
  const engine::Linear* embedding = &weights_->embedding();
  for (const auto& [name, linear] : weights_->linears()) {
    if (&linear == head) head_name_ = name;
    // The embedding is read on the host (a row per token), unless it is the head too.
    if (&linear == embedding && &linear != head) continue;
    // f32 linears (LFM2-MoE's router, which llama.cpp keeps in f32 too) run on the host.
    if (linear.is_int8()) upload_linear(name);
  }
  for (const auto& [name, tensor] : weights_->vectors()) upload_vector(name);
  unused_ = ctx_->make_buffer(4);
  bind_layers();
}

VulkanBackend::~VulkanBackend() = default;

void VulkanBackend::upload_linear(const std::string& name) {
  if (share_) {
    engine::Linear& held = weights_->int8_linear_mutable(name);
    held.hold_grid();  // unpacked once if packed; from then on in place
    const kernels::Int8Weights grid = held.grid_view();
    auto it = linears_.find(name);
    // Already the device's view of these very pages: nothing to do (a PULSE write).
    if (it != linears_.end() && it->second.values.data() == grid.values &&
        it->second.scales.data() == grid.scales)
      return;
    DeviceQ8Matrix m;
    m.rows = grid.rows;
    m.cols = grid.cols;
    // The allocations span whole pages (PageVector), so the imported ranges are theirs; the
    // scales' last word, which the shader reads whole, is inside them.
    m.values = ctx_->import_host(const_cast<int8_t*>(grid.values),
                                 round_up_to_pages(static_cast<size_t>(m.rows * m.cols)));
    m.scales = ctx_->import_host(
        const_cast<uint16_t*>(grid.scales),
        round_up_to_pages(static_cast<size_t>(m.rows * m.cols / kBlock) * sizeof(uint16_t)));
    linears_.insert_or_assign(name, std::move(m));
    return;
  }
  const engine::Linear& linear = weights_->linear(name);
  auto it = linears_.find(name);
  if (it == linears_.end()) {
    DeviceQ8Matrix m;
    m.rows = linear.rows();
    m.cols = linear.cols();
    m.values = ctx_->make_device_buffer(static_cast<size_t>(m.rows * m.cols));
    m.scales =
        ctx_->make_device_buffer(static_cast<size_t>((m.rows * m.cols / kBlock + 1) / 2 * 4));
    it = linears_.emplace(name, std::move(m)).first;
  }
  fill(*ctx_, it->second, linear);
}

void VulkanBackend::upload_vector(const std::string& name) {
  const Tensor& t = weights_->vectors().at(name);
  auto it = vectors_.find(name);
  if (it == vectors_.end()) it = vectors_.emplace(name, ctx_->make_buffer(floats(t.numel()))).first;
  std::memcpy(it->second.data(), t.as<float>(), floats(t.numel()));
}

void VulkanBackend::bind_layers() {
  const ModelConfig& c = config();
  auto linear = [&](TensorRole role, int64_t layer, int64_t expert = -1) {
    const std::string name = tensor_name(c, role, layer, expert);
    const auto it = linears_.find(name);
    STOA_CHECK(it != linears_.end(), ErrorKind::kUnsupported, "tensor ", name,
               " is not on the int8 grid (the Vulkan pass computes W8A8)");
    return &it->second;
  };
  auto vector = [&](TensorRole role, int64_t layer) {
    return &vectors_.at(tensor_slot(c, role, layer).name);
  };
  layers_.clear();
  ffn_width_ = 0;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    Layer layer;
    layer.attention = c.is_attention_layer(i);
    if (layer.attention) {
      layer.q = linear(TensorRole::kAttnQ, i);
      layer.k = linear(TensorRole::kAttnK, i);
      layer.v = linear(TensorRole::kAttnV, i);
      layer.o = linear(TensorRole::kAttnOut, i);
      layer.q_norm = vector(TensorRole::kAttnQNorm, i);
      layer.k_norm = vector(TensorRole::kAttnKNorm, i);
    } else {
      layer.in_proj = linear(TensorRole::kConvInProj, i);
      layer.out_proj = linear(TensorRole::kConvOutProj, i);
      layer.conv_kernel = vector(TensorRole::kConvKernel, i);
    }
    layer.mixer_norm = vector(TensorRole::kMixerNorm, i);
    layer.ffn_norm = vector(TensorRole::kFfnNorm, i);
    if (c.is_moe_layer(i)) {
      layer.router = &weights_->linear(tensor_name(c, TensorRole::kRouter, i));
      layer.expert_bias = has_tensor(c, TensorRole::kExpertBias, i)
                              ? weights_->vec(tensor_slot(c, TensorRole::kExpertBias, i).name)
                              : nullptr;
      for (int64_t e = 0; e < c.num_experts; ++e) {
        layer.experts.push_back({linear(TensorRole::kExpertGate, i, e),
                                 linear(TensorRole::kExpertUp, i, e),
                                 linear(TensorRole::kExpertDown, i, e)});
        STOA_CHECK(layer.experts.back().gate->rows == layer.experts.front().gate->rows,
                   ErrorKind::kUnsupported, "experts of layer ", i, " differ in width");
      }
      const int64_t width = layer.experts.front().gate->rows;
      STOA_CHECK(width % kBlock == 0, ErrorKind::kUnsupported,
                 "the experts' width does not fit the W8A8 pass");
      // Every (token, expert) pair is a row: K per token.
      ffn_width_ = std::max(ffn_width_, width * c.num_experts_per_tok);
      expert_rows_per_token_ = c.num_experts_per_tok;
    } else {
      layer.gate = linear(TensorRole::kFfnGate, i);
      layer.up = linear(TensorRole::kFfnUp, i);
      layer.down = linear(TensorRole::kFfnDown, i);
      STOA_CHECK(layer.gate->rows % kBlock == 0, ErrorKind::kUnsupported,
                 "the feed-forward width does not fit the W8A8 pass");
      ffn_width_ = std::max(ffn_width_, layer.gate->rows);
    }
    layers_.push_back(layer);
  }
}

void VulkanBackend::weights_written(std::span<const std::string> names) {
  for (const std::string& name : names) {
    STOA_CHECK(weights_->has_linear(name) || weights_->vectors().count(name) != 0,
               ErrorKind::kInvalidArgument, "weights_written names ", name,
               ", which the weights do not hold");
  }
  for (const std::string& name : names) {
    if (linears_.count(name) != 0) {
      upload_linear(name);
    } else if (vectors_.count(name) != 0) {
      upload_vector(name);
    }
    // Else the embedding, which passes read from the host copy itself.
  }
}

size_t VulkanBackend::allocated_weight_bytes() const {
  size_t bytes = 0;
  for (const auto& [name, m] : linears_)
    for (const Buffer* b : {&m.values, &m.scales})
      if (!b->imported()) bytes += b->size();
  for (const auto& [name, b] : vectors_) bytes += b.size();
  return bytes;
}

bool VulkanBackend::weights_in_device_memory() const {
  return !linears_.empty() && std::all_of(linears_.begin(), linears_.end(), [](const auto& l) {
    return l.second.values.data() == nullptr && l.second.scales.data() == nullptr;
  });
}

size_t VulkanBackend::imported_weight_bytes() const {
  size_t bytes = 0;
  for (const auto& [name, m] : linears_)
    for (const Buffer* b : {&m.values, &m.scales})
      if (b->imported()) bytes += b->size();
  return bytes;
}

std::unique_ptr<engine::SequenceState> VulkanBackend::new_state(int64_t capacity) const {
  STOA_CHECK(capacity >= 0, ErrorKind::kInvalidArgument, "a sequence's capacity must be >= 0");
  // Owned by the device, not this backend: a replay moves a sequence between the backends of
  // successive weight versions, as the CPU engine's sequences move between runners.
  return std::make_unique<VulkanSequence>(ctx_, ctx_.get(), config(), capacity);
}

void VulkanBackend::reserve_pass(int64_t T, int64_t R, int64_t probabilities) {
  const ModelConfig& c = config();
  const int64_t H = c.hidden_size, q_dim = c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim, inter = ffn_width_;
  if (T > reserved_tokens_) {
    // The widest activation rows: hidden, attention or a feed-forward's (MoE: K expert rows
    // per token, counted in ffn_width_).
    const int64_t widest = std::max({H, q_dim, inter});
    for (Buffer& b : hidden_) b = ctx_->make_buffer(floats(T * H));
    normed_ = ctx_->make_buffer(floats(T * H));
    if (c.arch != Arch::kQwen3) bcx_ = ctx_->make_buffer(floats(T * 3 * H));
    act_values_ = ctx_->make_buffer(static_cast<size_t>(T * widest));
    act_scales_ = ctx_->make_buffer(floats(T * widest / kBlock));
    act_sums_ = ctx_->make_buffer(floats(T * widest / kBlock));
    q_ = ctx_->make_buffer(floats(T * q_dim));
    qn_ = ctx_->make_buffer(floats(T * q_dim));
    qr_ = ctx_->make_buffer(floats(T * q_dim));
    ctx_rows_ = ctx_->make_buffer(floats(T * std::max(q_dim, H)));  // attention or conv out
    k_ = ctx_->make_buffer(floats(T * kv_dim));
    kn_ = ctx_->make_buffer(floats(T * kv_dim));
    kr_ = ctx_->make_buffer(floats(T * kv_dim));
    v_ = ctx_->make_buffer(floats(T * kv_dim));
    delta_ = ctx_->make_buffer(floats(T * H));
    if (expert_rows_per_token_ > 0) {
      expert_in_ = ctx_->make_buffer(floats(T * expert_rows_per_token_ * H));
      expert_out_ = ctx_->make_buffer(floats(T * expert_rows_per_token_ * H));
    }
    gate_ = ctx_->make_buffer(floats(T * inter));
    up_ = ctx_->make_buffer(floats(T * inter));
    swiglu_ = ctx_->make_buffer(floats(T * inter));
    cos_ = ctx_->make_buffer(floats(T * c.head_dim / 2));
    sin_ = ctx_->make_buffer(floats(T * c.head_dim / 2));
    reserved_tokens_ = T;
  }
  if (R > reserved_rows_) {
    head_in_ = ctx_->make_buffer(floats(R * H));
    head_normed_ = ctx_->make_buffer(floats(R * H));
    // The head's activations reuse act_*: R <= T, so they are wide enough.
    logits_ = ctx_->make_buffer(floats(R * c.vocab_size));
    reserved_rows_ = R;
  }
  if (probabilities > reserved_probabilities_) {
    probabilities_ = ctx_->make_buffer(floats(probabilities));
    reserved_probabilities_ = probabilities;
  }
}

// One decoder layer over the pass's tokens, as engine::Architecture::forward_layers and
// attention_block / swiglu_ffn compute it. The residual stream is in hidden_[0]; after the
// attention it is in hidden_[1], after the feed-forward in hidden_[0] again.
void VulkanBackend::record_layer(const Layer& layer, int64_t index) {
  const ModelConfig& c = config();
  const int64_t T = pass_tokens_;
  const Buffer& in = hidden_[0];
  const Buffer& mid = hidden_[1];
  const int64_t H = c.hidden_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const uint32_t tokens = u32(T);

  rows_.record_rmsnorm(pass_, in, *layer.mixer_norm, normed_, tokens, u32(H), eps);
  quantize_.record(pass_, normed_, act_values_, act_scales_, act_sums_, u32(T * H / kBlock));
  if (layer.attention) {
    record_attention(layer, index);
  } else {
    record_conv(layer, index);
  }
  ops_.record(pass_, V2PassOp::kAdd, u32(T * H), 0, 0, 0.0f, in, delta_, unused_, unused_, mid);

  rows_.record_rmsnorm(pass_, mid, *layer.ffn_norm, normed_, tokens, u32(H), eps);
  if (!layer.experts.empty()) {
    record_moe(layer);
  } else {
    record_swiglu(layer);
  }
  ops_.record(pass_, V2PassOp::kAdd, u32(T * H), 0, 0, 0.0f, mid, delta_, unused_, unused_, in);
}

// The dense SwiGLU feed-forward of normed_ into delta_ (engine/swiglu.cpp).
void VulkanBackend::record_swiglu(const Layer& layer) {
  const int64_t T = pass_tokens_, H = config().hidden_size, inter = layer.gate->rows;
  const uint32_t tokens = u32(T);
  quantize_.record(pass_, normed_, act_values_, act_scales_, act_sums_, u32(T * H / kBlock));
  matvec_.record(pass_, *layer.gate, act_values_, act_scales_, gate_, tokens, u32(inter));
  matvec_.record(pass_, *layer.up, act_values_, act_scales_, up_, tokens, u32(inter));
  ops_.record(pass_, V2PassOp::kSiluMul, u32(T * inter), 0, 0, 0.0f, gate_, up_, unused_, unused_,
              swiglu_);
  quantize_.record(pass_, swiglu_, act_values_, act_scales_, act_sums_, u32(T * inter / kBlock));
  matvec_.record(pass_, *layer.down, act_values_, act_scales_, delta_, tokens, u32(H));
}

// LFM2's gated short conv (engine/short_conv.cpp) of the quantised normed input, into delta_.
void VulkanBackend::record_conv(const Layer& layer, int64_t index) {
  const ModelConfig& c = config();
  const int64_t T = pass_tokens_, H = c.hidden_size;
  matvec_.record(pass_, *layer.in_proj, act_values_, act_scales_, bcx_, u32(T), u32(3 * H));
  for (const Segment& s : segments_)
    conv_.record(pass_, bcx_, *layer.conv_kernel, s.seq->conv(), ctx_rows_, u32(H),
                 u32(c.conv_kernel), u32(s.offset), u32(s.count), u32(s.seq->conv_base(index)));
  quantize_.record(pass_, ctx_rows_, act_values_, act_scales_, act_sums_, u32(T * H / kBlock));
  matvec_.record(pass_, *layer.out_proj, act_values_, act_scales_, delta_, u32(T), u32(H));
}

// Attention (engine/attention.cpp) of the quantised normed input, into delta_: Q/K/V from one
// quantisation, per-head norms and RoPE, the cache written, each segment attending causally.
void VulkanBackend::record_attention(const Layer& layer, int64_t index) {
  const ModelConfig& c = config();
  const int64_t T = pass_tokens_;
  const int64_t H = c.hidden_size, hd = c.head_dim;
  const int64_t q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const uint32_t tokens = u32(T);
  matvec_.record(pass_, *layer.q, act_values_, act_scales_, q_, tokens, u32(q_dim));
  matvec_.record(pass_, *layer.k, act_values_, act_scales_, k_, tokens, u32(kv_dim));
  matvec_.record(pass_, *layer.v, act_values_, act_scales_, v_, tokens, u32(kv_dim));
  rows_.record_rmsnorm(pass_, k_, *layer.k_norm, kn_, u32(T * c.num_kv_heads), u32(hd), eps);
  ops_.record(pass_, V2PassOp::kRope, u32(T * kv_dim), u32(hd), u32(kv_dim), 0.0f, kn_, cos_, sin_,
              unused_, kr_);
  rows_.record_rmsnorm(pass_, q_, *layer.q_norm, qn_, u32(T * c.num_heads), u32(hd), eps);
  ops_.record(pass_, V2PassOp::kRope, u32(T * q_dim), u32(hd), u32(q_dim), 0.0f, qn_, cos_, sin_,
              unused_, qr_);
  // The new keys and values into their sequences' caches before any token attends, so a token
  // sees the tokens before it in its segment exactly as it would see cached ones.
  for (const Segment& s : segments_) {
    const size_t from = floats(s.offset * kv_dim), bytes = floats(s.count * kv_dim);
    pass_.copy(kr_, from, s.seq->keys(), s.seq->offset(index, s.start), bytes);
    pass_.copy(v_, from, s.seq->values(), s.seq->offset(index, s.start), bytes);
  }
  pass_.barrier();
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  uint32_t scale_bits = 0;
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  for (const Segment& s : segments_) {
    const V2AttentionParams p{u32(hd),
                              u32(c.num_heads),
                              u32(c.num_heads / c.num_kv_heads),
                              u32(s.start + 1),
                              1u,
                              u32(s.offset * q_dim),
                              u32(q_dim),
                              u32(static_cast<int64_t>(s.seq->offset(index, 0) / sizeof(float))),
                              u32(kv_dim),
                              u32(kv_dim),
                              u32(s.start + s.count),
                              scale_bits};
    attention_.record(pass_, qr_, s.seq->keys(), s.seq->values(), probabilities_, ctx_rows_, p,
                      u32(s.count * c.num_heads));
  }
  quantize_.record(pass_, ctx_rows_, act_values_, act_scales_, act_sums_, u32(T * q_dim / kBlock));
  matvec_.record(pass_, *layer.o, act_values_, act_scales_, delta_, tokens, u32(H));
}

engine::PassLogits VulkanBackend::forward(std::span<const engine::BackendInput> inputs) {
  const ModelConfig& c = config();
  const int64_t H = c.hidden_size, V = c.vocab_size, half = c.head_dim / 2;
  // Everything is validated before anything changes.
  engine::check_pass_inputs(inputs, V);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto* seq = dynamic_cast<const VulkanSequence*>(inputs[i].seq);
    STOA_CHECK(seq != nullptr && seq->owner() == ctx_.get(), ErrorKind::kInvalidArgument,
               "batch input ", i, ": the sequence belongs to another engine backend or device");
    STOA_CHECK(seq->made_for(c), ErrorKind::kInvalidArgument, "batch input ", i,
               ": the sequence was made for a different model");
  }
  segments_.clear();
  logit_ranges_.assign(inputs.size(), {0, 0});
  std::vector<int64_t> rows;  // pass token index of each logit row
  int64_t T = 0, probabilities = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const engine::BackendInput& in = inputs[i];
    const auto n = static_cast<int64_t>(in.tokens.size());
    const auto first = static_cast<int64_t>(rows.size());
    if (n > 0) {
      auto* seq = static_cast<VulkanSequence*>(in.seq);
      segments_.push_back({seq, T, n, seq->length()});
      probabilities = std::max(probabilities, n * c.num_heads * (seq->length() + n));
      if (in.logits == engine::Logits::kAll) {
        for (int64_t j = 0; j < n; ++j) rows.push_back(T + j);
      } else if (in.logits == engine::Logits::kLast) {
        rows.push_back(T + n - 1);
      }
    }
    logit_ranges_[i] = {first, static_cast<int64_t>(rows.size())};
    T += n;
  }
  const auto R = static_cast<int64_t>(rows.size());
  if (T == 0) return engine::PassLogits(nullptr, V, &logit_ranges_);
  reserve_pass(T, R, probabilities);
  pass_tokens_ = 0;  // counted up to T as the host fills the embedding rows

  // The host's part: the tokens' embedding rows and their RoPE angles (v2: host tables).
  auto* hidden = static_cast<float*>(hidden_[0].data());
  auto* cos = static_cast<float*>(cos_.data());
  auto* sin = static_cast<float*>(sin_.data());
  for (const engine::BackendInput& in : inputs) {
    if (in.tokens.empty()) continue;
    const auto* seq = static_cast<const VulkanSequence*>(in.seq);
    for (size_t j = 0; j < in.tokens.size(); ++j) {
      const int64_t t = pass_tokens_ + static_cast<int64_t>(j);
      weights_->embedding().row(in.tokens[j], hidden + t * H);
      engine::rope_angles(c.head_dim, seq->length() + static_cast<int64_t>(j), c.rope_theta,
                          cos + t * half, sin + t * half);
    }
    pass_tokens_ += static_cast<int64_t>(in.tokens.size());
  }

  pass_.begin();
  for (size_t li = 0; li < layers_.size(); ++li)
    record_layer(layers_[li], static_cast<int64_t>(li));
  if (R > 0) {
    for (int64_t r = 0; r < R; ++r)
      pass_.copy(hidden_[0], floats(rows[static_cast<size_t>(r)] * H), head_in_, floats(r * H),
                 floats(H));
    pass_.barrier();
    const auto eps = static_cast<float>(c.rms_norm_eps);
    rows_.record_rmsnorm(pass_, head_in_, vectors_.at(tensor_slot(c, TensorRole::kFinalNorm).name),
                         head_normed_, u32(R), u32(H), eps);
    quantize_.record(pass_, head_normed_, act_values_, act_scales_, act_sums_, u32(R * H / kBlock));
    matvec_.record(pass_, linears_.at(head_name_), act_values_, act_scales_, logits_, u32(R),
                   u32(V));
  }
  pass_.submit_and_wait();

  for (const engine::BackendInput& in : inputs)
    static_cast<VulkanSequence*>(in.seq)->commit(in.tokens.data(),
                                                 static_cast<int64_t>(in.tokens.size()));
  return engine::PassLogits(static_cast<const float*>(logits_.data()), V, &logit_ranges_);
}

}  // namespace stoa::gpu::vulkan
