#include "model/tensor_roles.h"

#include <cstring>

#include "core/enum_names.h"
#include "core/error.h"
#include "model/arch_registry.h"

namespace stoa {

constexpr EnumName<TensorRole> kTensorRoleNames[] = {
    {TensorRole::kEmbedding, "embedding"},
    {TensorRole::kFinalNorm, "final_norm"},
    {TensorRole::kLmHead, "lm_head"},
    {TensorRole::kMixerNorm, "mixer_norm"},
    {TensorRole::kFfnNorm, "ffn_norm"},
    {TensorRole::kAttnQ, "attn_q"},
    {TensorRole::kAttnK, "attn_k"},
    {TensorRole::kAttnV, "attn_v"},
    {TensorRole::kAttnOut, "attn_out"},
    {TensorRole::kAttnQNorm, "attn_q_norm"},
    {TensorRole::kAttnKNorm, "attn_k_norm"},
    {TensorRole::kConvInProj, "conv_in_proj"},
    {TensorRole::kConvInProjBias, "conv_in_proj_bias"},
    {TensorRole::kConvKernel, "conv_kernel"},
    {TensorRole::kConvKernelBias, "conv_kernel_bias"},
    {TensorRole::kConvOutProj, "conv_out_proj"},
    {TensorRole::kConvOutProjBias, "conv_out_proj_bias"},
    {TensorRole::kFfnGate, "ffn_gate"},
    {TensorRole::kFfnUp, "ffn_up"},
    {TensorRole::kFfnDown, "ffn_down"},
    {TensorRole::kRouter, "router"},
    {TensorRole::kExpertBias, "expert_bias"},
    {TensorRole::kExpertGate, "expert_gate"},
    {TensorRole::kExpertUp, "expert_up"},
    {TensorRole::kExpertDown, "expert_down"}};

const char* tensor_role_name(TensorRole role) {
  return enum_name(kTensorRoleNames, role, "unknown");
}

TensorScope tensor_scope(const TensorRoleRow& row) {
  if (std::strstr(row.hf_name, "{e}") != nullptr) return TensorScope::kExpert;
  if (std::strstr(row.hf_name, "{i}") != nullptr) return TensorScope::kLayer;
  return TensorScope::kModel;
}

namespace {

bool present(const ModelConfig& c, TensorPresence presence, int64_t layer) {
  switch (presence) {
    case TensorPresence::kAlways:
      return true;
    case TensorPresence::kAttentionLayer:
      return c.is_attention_layer(layer);
    case TensorPresence::kConvLayer:
      return !c.is_attention_layer(layer);
    case TensorPresence::kConvLayerWithBias:
      return !c.is_attention_layer(layer) && c.conv_bias;
    case TensorPresence::kDenseFfnLayer:
      return !c.is_moe_layer(layer);
    case TensorPresence::kMoeLayer:
      return c.is_moe_layer(layer);
    case TensorPresence::kMoeLayerWithExpertBias:
      return c.is_moe_layer(layer) && c.use_expert_bias;
    case TensorPresence::kUntiedHead:
      return !c.tie_word_embeddings;
  }
  return false;
}

int64_t dim_size(const ModelConfig& c, Dim dim) {
  switch (dim) {
    case Dim::kOne:
      return 1;
    case Dim::kVocab:
      return c.vocab_size;
    case Dim::kHidden:
      return c.hidden_size;
    case Dim::kConvInWidth:
      return 3 * c.hidden_size;
    case Dim::kQueryWidth:
      return c.num_heads * c.head_dim;
    case Dim::kKvWidth:
      return c.num_kv_heads * c.head_dim;
    case Dim::kHeadDim:
      return c.head_dim;
    case Dim::kFfn:
      return c.intermediate_size;
    case Dim::kExpertFfn:
      return c.moe_intermediate_size;
    case Dim::kExperts:
      return c.num_experts;
    case Dim::kConvKernel:
      return c.conv_kernel;
  }
  return 0;
}

TensorSlot make_slot(const ModelConfig& c, const TensorRoleRow& row, int64_t layer,
                     int64_t expert) {
  TensorSlot slot;
  slot.row = &row;
  slot.layer = layer;
  slot.expert = expert;
  slot.name = expand_tensor_pattern(row.hf_name, layer, expert);
  for (Dim dim : row.shape) slot.shape.push_back(dim_size(c, dim));
  return slot;
}

// Appends layer `layer`'s tensors of the layer rows [begin, end).
void append_layer(const ModelConfig& c, const std::vector<TensorRoleRow>& rows, size_t begin,
                  size_t end, int64_t layer, std::vector<TensorSlot>* out) {
  size_t k = begin;
  while (k < end) {
    if (tensor_scope(rows[k]) == TensorScope::kLayer) {
      if (present(c, rows[k].presence, layer)) out->push_back(make_slot(c, rows[k], layer, -1));
      ++k;
      continue;
    }
    size_t group_end = k;  // the contiguous expert rows: all of expert 0, then expert 1, ...
    while (group_end < end && tensor_scope(rows[group_end]) == TensorScope::kExpert) ++group_end;
    for (int64_t e = 0; e < c.num_experts; ++e) {
      for (size_t r = k; r < group_end; ++r) {
        if (present(c, rows[r].presence, layer)) out->push_back(make_slot(c, rows[r], layer, e));
      }
    }
    k = group_end;
  }
}

}  // namespace

std::vector<TensorSlot> tensor_slots(const ModelConfig& config) {
  const std::vector<TensorRoleRow>& rows = arch_info(config.arch).tensor_roles;
  std::vector<TensorSlot> out;
  size_t i = 0;
  while (i < rows.size()) {
    if (tensor_scope(rows[i]) == TensorScope::kModel) {
      if (present(config, rows[i].presence, -1)) out.push_back(make_slot(config, rows[i], -1, -1));
      ++i;
      continue;
    }
    size_t end = i;
    while (end < rows.size() && tensor_scope(rows[end]) != TensorScope::kModel) ++end;
    for (int64_t layer = 0; layer < config.num_layers; ++layer)
      append_layer(config, rows, i, end, layer, &out);
    i = end;
  }
  return out;
}

const TensorRoleRow* find_role_row(const ArchInfo& arch, TensorRole role) {
  for (const TensorRoleRow& row : arch.tensor_roles) {
    if (row.role == role) return &row;
  }
  return nullptr;
}

bool has_tensor(const ModelConfig& config, TensorRole role, int64_t layer) {
  const TensorRoleRow* row = find_role_row(arch_info(config.arch), role);
  return row != nullptr && present(config, row->presence, layer);
}

TensorSlot tensor_slot(const ModelConfig& config, TensorRole role, int64_t layer, int64_t expert) {
  const TensorRoleRow* row = find_role_row(arch_info(config.arch), role);
  STOA_CHECK(row != nullptr, ErrorKind::kInvalidArgument, arch_name(config.arch),
             " has no tensor of role ", tensor_role_name(role));
  const TensorScope scope = tensor_scope(*row);
  STOA_CHECK((scope == TensorScope::kModel) == (layer < 0) &&
                 (scope == TensorScope::kExpert) == (expert >= 0),
             ErrorKind::kInvalidArgument, "role ", tensor_role_name(role), " of ",
             arch_name(config.arch), " asked for with layer ", layer, " expert ", expert);
  STOA_CHECK(present(config, row->presence, layer), ErrorKind::kInvalidArgument,
             arch_name(config.arch), " layer ", layer, " has no tensor of role ",
             tensor_role_name(role));
  return make_slot(config, *row, layer, expert);
}

std::string expand_tensor_pattern(const char* pattern, int64_t layer, int64_t expert) {
  std::string out;
  for (const char* p = pattern; *p != '\0'; ++p) {
    if (std::strncmp(p, "{i}", 3) == 0) {
      out += std::to_string(layer);
      p += 2;
    } else if (std::strncmp(p, "{e}", 3) == 0) {
      out += std::to_string(expert);
      p += 2;
    } else {
      out += *p;
    }
  }
  return out;
}

bool tensor_pattern_matches(const char* pattern, const std::string& name) {
  size_t at = 0;
  for (const char* p = pattern; *p != '\0'; ++p) {
    if (std::strncmp(p, "{i}", 3) == 0 || std::strncmp(p, "{e}", 3) == 0) {
      size_t digits = 0;
      while (at + digits < name.size() && name[at + digits] >= '0' && name[at + digits] <= '9')
        ++digits;
      if (digits == 0) return false;
      at += digits;
      p += 2;
    } else {
      if (at >= name.size() || name[at] != *p) return false;
      ++at;
    }
  }
  return at == name.size();
}

TensorPrecision tensor_precision(const std::string& name) {
  for (const ArchInfo* arch : all_archs()) {
    for (const TensorRoleRow& row : arch->tensor_roles) {
      if (row.precision != TensorPrecision::kByShape && tensor_pattern_matches(row.hf_name, name))
        return row.precision;
    }
  }
  return TensorPrecision::kByShape;
}

bool tensor_has_role(const std::string& name, TensorRole role) {
  for (const ArchInfo* arch : all_archs()) {
    const TensorRoleRow* row = find_role_row(*arch, role);
    if (row != nullptr && tensor_pattern_matches(row->hf_name, name)) return true;
  }
  return false;
}

}  // namespace stoa
