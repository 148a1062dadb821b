// Tensor-role tables: what each tensor of an architecture *is*. Each architecture's registry
// entry (arch_<name>.cpp) lists its tensors once, one row each: the role (attention q, conv kernel,
// router, ...), the Hugging Face name pattern, llama.cpp's GGUF name, the shape in terms of the
// config, when a layer has it, and its precision class. Everything that needs a tensor's name
// asks the table by role instead of spelling it: the tensor list of ModelWeights, the engine
// binders (engine/<arch>.cpp), the trainer's policy layouts (train/models/), the GGUF map and
// the precision plan. Adding an architecture of this family is a new table, not new names here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace stoa {

struct ArchInfo;

enum class TensorRole : uint8_t {
  // Model level.
  kEmbedding,
  kFinalNorm,
  kLmHead,
  // Every layer: the pre-norms of the mixer (attention or conv) and of the feed-forward.
  kMixerNorm,
  kFfnNorm,
  // Attention mixer (GQA, per-head RMSNorm on q and k).
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnOut,
  kAttnQNorm,
  kAttnKNorm,
  // LFM2 gated short-conv mixer: in_proj (B, C, x), depthwise kernel, out_proj, optional biases.
  kConvInProj,
  kConvInProjBias,
  kConvKernel,
  kConvKernelBias,
  kConvOutProj,
  kConvOutProjBias,
  // Dense SwiGLU feed-forward.
  kFfnGate,
  kFfnUp,
  kFfnDown,
  // Sparse MoE feed-forward: router, routing bias, per-expert SwiGLU.
  kRouter,
  kExpertBias,
  kExpertGate,
  kExpertUp,
  kExpertDown,
};

const char* tensor_role_name(TensorRole role);  // "attn_q", "expert_gate", ...

// When a row's tensor exists (for layer rows: in which layers).
enum class TensorPresence : uint8_t {
  kAlways,
  kAttentionLayer,
  kConvLayer,
  kConvLayerWithBias,       // conv layers of a config with conv_bias
  kDenseFfnLayer,           // layers whose feed-forward is not MoE
  kMoeLayer,                //
  kMoeLayerWithExpertBias,  // MoE layers of a config with use_expert_bias
  kUntiedHead,              // only when tie_word_embeddings is false
};

// One dimension of a tensor's shape, named by the config size it is.
enum class Dim : uint8_t {
  kOne,
  kVocab,
  kHidden,
  kConvInWidth,  // 3 * hidden (B, C and x of the short conv)
  kQueryWidth,   // num_heads * head_dim
  kKvWidth,      // num_kv_heads * head_dim
  kHeadDim,
  kFfn,        // intermediate_size
  kExpertFfn,  // moe_intermediate_size
  kExperts,    // num_experts
  kConvKernel,
};

// A row's shape, outermost first: dims(Dim::kVocab, Dim::kHidden).
template <typename... Dims>
std::vector<Dim> dims(Dims... each) {
  return {each...};
}

// The precision class (model/precision_plan.h). Routing inputs stay f32: expert choice is a
// discontinuous top-k that a rounded router or bias would flip.
enum class TensorPrecision : uint8_t {
  kByShape,          // the plan's shape rule: int8 grid where it fits, else bf16
  kRouting,          // f32 carrier; saved in the model directory's dtype
  kRoutingStoredF32  // f32 carrier, and kept f32 in a model directory whatever its dtype
};

struct TensorRoleRow {
  TensorRole role;
  // Name patterns: "{i}" is the layer index, "{e}" the expert index. A row whose HF pattern has
  // "{i}" is a layer row, with "{e}" an expert row (one tensor per expert); others are model rows.
  const char* hf_name;
  // llama.cpp's name (src/llama-arch.cpp); expert rows name the merged [experts, ...] tensor.
  // nullptr: llama.cpp has no counterpart (GGUF export refuses the config).
  const char* gguf_name;
  TensorPresence presence;
  std::vector<Dim> shape;  // outermost first, as in the HF state dict
  TensorPrecision precision = TensorPrecision::kByShape;
};

// The order of a table is the order of the tensor list: model rows before the layer rows
// (embedding), the layer rows (one contiguous block, expert rows contiguous inside it: all rows of
// expert 0, then expert 1, ...), model rows after (final norm, head).
enum class TensorScope : uint8_t { kModel, kLayer, kExpert };
TensorScope tensor_scope(const TensorRoleRow& row);

// One tensor of a concrete config: a row instantiated for a layer (and expert).
struct TensorSlot {
  const TensorRoleRow* row = nullptr;
  int64_t layer = -1;   // -1 for model-level tensors
  int64_t expert = -1;  // -1 unless an expert row
  std::string name;     // Hugging Face name
  Shape shape;
};

// Every tensor `config` implies, in table order (expected_tensors is this without the rows).
std::vector<TensorSlot> tensor_slots(const ModelConfig& config);

// The row of `role` in the architecture's table; nullptr when the architecture has none.
const TensorRoleRow* find_role_row(const ArchInfo& arch, TensorRole role);
// True when `config`'s layer `layer` (-1: model level) has a tensor of `role`.
bool has_tensor(const ModelConfig& config, TensorRole role, int64_t layer = -1);
// The tensor of `role` in layer `layer` (and expert `expert`). Fails with kInvalidArgument when
// the architecture or that layer has no such tensor (a binder asking for the wrong role).
TensorSlot tensor_slot(const ModelConfig& config, TensorRole role, int64_t layer = -1,
                       int64_t expert = -1);
inline std::string tensor_name(const ModelConfig& config, TensorRole role, int64_t layer = -1,
                               int64_t expert = -1) {
  return tensor_slot(config, role, layer, expert).name;
}

// A pattern with "{i}"/"{e}" replaced by `layer`/`expert`.
std::string expand_tensor_pattern(const char* pattern, int64_t layer, int64_t expert);
// True when `name` is `pattern` with decimal numbers in place of "{i}" and "{e}".
bool tensor_pattern_matches(const char* pattern, const std::string& name);
// The precision class of a tensor named `name` in any architecture's table (kByShape when no
// row claims it): how the precision plan answers without a config.
TensorPrecision tensor_precision(const std::string& name);
// True when `name` is the tensor of `role` in some architecture's table.
bool tensor_has_role(const std::string& name, TensorRole role);

}  // namespace stoa
