// The Vulkan compute backend (engine/backend.h; issue 54): the engine's forward pass on a Vulkan
// device in engine arithmetic v2 (docs/design/arithmetic.md), bit for bit the CPU engine's
// (ModelRunner) logits, because every kernel of the pass computes v2's formula to the bit
// (test_vulkan checks each against kernels::v2, and the whole pass against the CPU engine).
//
// What lives where:
//   - weights: the host copy (EngineWeights) stays the authority — PULSE writes and hashes it.
//     On unified memory with host imports (DeviceInfo::imports_host_memory: an integrated GPU,
//     lavapipe) every int8 linear is that host grid itself, imported in place (the Linear holds
//     its page-aligned grid, Linear::hold_grid), so the weights exist once and a PULSE write
//     needs no upload. Elsewhere (a discrete GPU; WeightPlacement::kMirror) every int8 linear
//     is mirrored in device buffers — VRAM where the device has memory the host cannot map,
//     filled through staging copies — and weights_written() copies the named tensors again. The
//     f32 vectors (norms, conv kernels: under 1 MB at the seed's shape) are mirrored always.
//     The embedding table stays on the host (a pass looks up its tokens' rows there) unless it
//     is also the output head.
//   - sequences: VulkanSequence, the KV cache in device memory.
//   - a pass: one command buffer (PassRecorder) with every layer's kernels, one submission;
//     the host does the embedding lookup and the RoPE angle table (v2: host tables), the
//     logits are read in place from the device's host-visible buffer.
// Architectures: Qwen3, LFM2 (attention and gated short-conv layers, dense SwiGLU) and LFM2-MoE.
// A MoE layer's routing is data-dependent: the pass is submitted up to the layer's normed
// input, the host computes the router (an f32 linear, as the CPU engine) and the choice, the
// device every chosen expert's SwiGLU on the rows grouped by expert, and the host the mixing
// (kernels::mix_add, in the CPU engine's order); two round trips per MoE layer, its cost.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/engine_weights.h"
#include "gpu/vulkan/arith_check.h"
#include "gpu/vulkan/context.h"
#include "gpu/vulkan/conv_segment.h"
#include "gpu/vulkan/pass_recorder.h"
#include "gpu/vulkan/q8_matvec.h"
#include "gpu/vulkan/q8_quantize.h"
#include "gpu/vulkan/vulkan_sequence.h"

namespace stoa::gpu::vulkan {

// Where the int8 weights live: shared with the host where the device can (unified memory with
// host imports), or mirrored in device buffers (every device; what a discrete GPU does).
enum class WeightPlacement { kShareWhereUnified, kMirror };

class VulkanBackend final : public engine::EngineBackend {
 public:
  // Mirrors `weights` to the device (or shares them, above), taking them from the caller only
  // when it succeeds: if it throws — kUnsupported (in words) for weights it cannot compute
  // (another architecture, f32 weights: a worker holds int8; a pipeline stage's share), or the
  // device's own failure (out of memory, a lost device) — `weights` still holds them, so the
  // caller can compute on the CPU. unsupported() says the first kind beforehand (empty: it can).
  static std::string unsupported(const engine::EngineWeights& weights);
  VulkanBackend(std::shared_ptr<Context> ctx, std::unique_ptr<engine::EngineWeights>&& weights,
                WeightPlacement placement = WeightPlacement::kShareWhereUnified);
  ~VulkanBackend() override;

  const char* backend_name() const override { return "vulkan"; }
  const ModelConfig& config() const override { return weights_->config(); }
  engine::EngineWeights& host_weights() override { return *weights_; }
  // kInvalidArgument for a name the weights do not hold (nothing is copied then). Shared int8
  // tensors need nothing: the device reads the pages the host wrote.
  void weights_written(std::span<const std::string> names) override;
  std::unique_ptr<engine::SequenceState> new_state(int64_t capacity) const override;
  engine::PassLogits forward(std::span<const engine::BackendInput> inputs) override;

  const Context& device() const { return *ctx_; }
  // The memory accounting (issue 54 item 3), in bytes: device allocations of the backend's own
  // for the weights (mirrored linears and the vectors), and host weight pages the device reads
  // in place (imported: no memory of their own).
  size_t allocated_weight_bytes() const;
  size_t imported_weight_bytes() const;
  // Whether the int8 weights are the host's own pages (see WeightPlacement).
  bool shares_host_weights() const { return share_; }
  // Whether the mirrored int8 weights are in memory only the device reaches (a discrete GPU's
  // VRAM, written through staging copies: Context::make_device_buffer).
  bool weights_in_device_memory() const;

 private:
  struct Layer {
    bool attention = true;  // else LFM2's short conv
    const DeviceQ8Matrix *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
    const Buffer *q_norm = nullptr, *k_norm = nullptr;
    const DeviceQ8Matrix *in_proj = nullptr, *out_proj = nullptr;
    const Buffer* conv_kernel = nullptr;
    const DeviceQ8Matrix *gate = nullptr, *up = nullptr, *down = nullptr;
    // MoE layers: the router on the host, the experts on the device.
    const engine::Linear* router = nullptr;
    const float* expert_bias = nullptr;
    struct Expert {
      const DeviceQ8Matrix *gate, *up, *down;
    };
    std::vector<Expert> experts;
    const Buffer *mixer_norm = nullptr, *ffn_norm = nullptr;
  };
  // Every int8 linear and f32 vector to the device (the constructor's work once it holds the
  // weights).
  void upload_weights();
  void upload_linear(const std::string& name);
  void upload_vector(const std::string& name);
  void bind_layers();
  // Grows the pass buffers to hold T tokens, R logit rows, `probabilities` attention floats.
  void reserve_pass(int64_t T, int64_t R, int64_t probabilities);
  void record_layer(const Layer& layer, int64_t index);
  // The mixers' outputs into delta_: attention, or the short conv.
  void record_attention(const Layer& layer, int64_t index);
  void record_conv(const Layer& layer, int64_t index);
  // The feed-forwards of normed_ into delta_: dense SwiGLU, or routed experts (vulkan_moe.cpp).
  void record_swiglu(const Layer& layer);
  void record_moe(const Layer& layer);

  std::shared_ptr<Context> ctx_;
  std::unique_ptr<engine::EngineWeights> weights_;
  bool share_ = false;
  Q8Matvec matvec_;
  Q8Quantize quantize_;
  V2Rows rows_;
  V2Attention attention_;
  V2PassOps ops_;
  ConvSegment conv_;
  PassRecorder pass_;

  std::map<std::string, DeviceQ8Matrix> linears_;  // by tensor name
  std::map<std::string, Buffer> vectors_;
  std::string head_name_;  // the output projection's tensor
  std::vector<Layer> layers_;
  int64_t ffn_width_ = 0;              // the widest feed-forward row per token (MoE: K expert rows)
  int64_t expert_rows_per_token_ = 0;  // K of a MoE model, else 0

  // Pass buffers, grow-only: sized for reserved_tokens_ tokens and reserved_rows_ logit rows.
  int64_t reserved_tokens_ = 0, reserved_rows_ = 0, reserved_probabilities_ = 0;
  Buffer hidden_[2], normed_, bcx_, act_values_, act_scales_, act_sums_, q_, qn_, qr_, k_, kn_, kr_,
      v_, ctx_rows_, delta_, gate_, up_, swiglu_, cos_, sin_, probabilities_, head_in_,
      head_normed_, logits_, expert_in_, expert_out_, unused_;

  // The current pass: its tokens, and per input the logit rows and its sequence.
  struct Segment {
    VulkanSequence* seq;
    int64_t offset, count, start;
  };
  std::vector<Segment> segments_;
  int64_t pass_tokens_ = 0;
  std::vector<std::pair<int64_t, int64_t>> logit_ranges_;
};

}  // namespace stoa::gpu::vulkan
