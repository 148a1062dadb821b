#include "model/gguf_arch_map.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "model/arch_registry.h"

namespace stoa {

using gguf::Value;
using gguf::ValueType;

const char* gguf_arch_name(Arch arch) {
  return arch_info(arch).gguf_name;
}

namespace {

// llama.cpp's conventions, asked of the role table rather than of the architecture's name: a
// table with a conv mixer is a hybrid (per-layer head_count_kv, shortconv keys), one with a
// router has experts (expert keys).
bool has_conv_layers(const ArchInfo& info) {
  return find_role_row(info, TensorRole::kConvInProj) != nullptr;
}
bool has_experts(const ArchInfo& info) {
  return find_role_row(info, TensorRole::kRouter) != nullptr;
}

}  // namespace

std::vector<GgufTensorPlan> gguf_tensor_plan(const ModelConfig& config) {
  std::vector<GgufTensorPlan> plan;
  std::map<std::string, size_t> merged_index;  // gguf name -> plan index (experts)
  for (const TensorSlot& slot : tensor_slots(config)) {
    const TensorRoleRow& row = *slot.row;
    STOA_CHECK(row.gguf_name != nullptr, ErrorKind::kUnsupported, "GGUF export: tensor '",
               slot.name, "' of ", arch_name(config.arch), " has no llama.cpp counterpart");
    const std::string gguf_name = expand_tensor_pattern(row.gguf_name, slot.layer, -1);
    // F16/Q8_0 candidates: the 2-D tensors of the shape rule. The router stays F32 as
    // llama.cpp's own quantizer keeps it: expert choice is a discrete decision that a rounded
    // router would flip.
    const bool matrix = row.shape.size() == 2 && row.precision == TensorPrecision::kByShape;
    if (slot.expert >= 0) {  // llama.cpp stacks the experts into one [experts, ...] tensor
      auto it = merged_index.find(gguf_name);
      if (it == merged_index.end()) {
        GgufTensorPlan entry{gguf_name, {}, {}, {}, matrix};
        merged_index[gguf_name] = plan.size();
        plan.push_back(std::move(entry));
        it = merged_index.find(gguf_name);
      }
      GgufTensorPlan& entry = plan[it->second];
      STOA_CHECK(slot.expert == static_cast<int64_t>(entry.sources.size()), ErrorKind::kInternal,
                 "experts of ", gguf_name, " are not listed in order at '", slot.name, "'");
      STOA_CHECK(entry.source_shapes.empty() || entry.source_shapes.front() == slot.shape,
                 ErrorKind::kInternal, "experts of ", gguf_name, " differ in shape at '", slot.name,
                 "'");
      entry.sources.push_back(slot.name);
      entry.source_shapes.push_back(slot.shape);
      entry.shape = slot.shape;
      entry.shape.insert(entry.shape.begin(), static_cast<int64_t>(entry.sources.size()));
      continue;
    }
    Shape shape = slot.shape;
    // HF keeps the depthwise conv kernel as [H, 1, L]; llama.cpp wants it squeezed to [H, L].
    if (row.role == TensorRole::kConvKernel && shape.size() == 3 && shape[1] == 1)
      shape = {shape[0], shape[2]};
    plan.push_back({gguf_name, shape, {slot.name}, {slot.shape}, matrix});
  }
  return plan;
}

std::vector<std::pair<std::string, Value>> gguf_metadata(const ModelConfig& c) {
  const std::string a = gguf_arch_name(c.arch);
  auto u32 = [](int64_t v, const char* what) {
    STOA_CHECK(v >= 0 && v <= 0xffffffffLL, ErrorKind::kUnsupported, "GGUF export: ", what, " = ",
               v, " does not fit a u32");
    return Value::u32(static_cast<uint32_t>(v));
  };
  std::vector<std::pair<std::string, Value>> kv;
  kv.emplace_back("general.architecture", Value::string(a));
  kv.emplace_back(a + ".vocab_size", u32(c.vocab_size, "vocab_size"));
  kv.emplace_back(a + ".context_length", u32(c.max_position_embeddings, "context_length"));
  kv.emplace_back(a + ".embedding_length", u32(c.hidden_size, "hidden_size"));
  kv.emplace_back(a + ".block_count", u32(c.num_layers, "num_layers"));
  kv.emplace_back(a + ".feed_forward_length", u32(c.intermediate_size, "intermediate_size"));
  kv.emplace_back(a + ".attention.head_count", u32(c.num_heads, "num_heads"));
  const ArchInfo& info = arch_info(c.arch);
  if (!has_conv_layers(info)) {
    kv.emplace_back(a + ".attention.head_count_kv", u32(c.num_kv_heads, "num_kv_heads"));
  } else {
    // LFM2: a per-layer array; 0 marks a (recurrent) conv layer.
    std::vector<int32_t> per_layer;
    for (int64_t l = 0; l < c.num_layers; ++l)
      per_layer.push_back(c.is_attention_layer(l) ? static_cast<int32_t>(c.num_kv_heads) : 0);
    kv.emplace_back(a + ".attention.head_count_kv", Value::array_i32(per_layer));
    STOA_CHECK(c.num_heads * c.head_dim == c.hidden_size, ErrorKind::kUnsupported,
               "GGUF export: llama.cpp's ", a, " needs num_heads * head_dim == hidden_size, got ",
               c.num_heads, " * ", c.head_dim, " != ", c.hidden_size);
    STOA_CHECK(!c.conv_bias, ErrorKind::kUnsupported, "GGUF export: llama.cpp's ", a,
               " has no conv bias (conv_bias = true)");
    kv.emplace_back(a + ".shortconv.l_cache", u32(c.conv_kernel, "conv_L_cache"));
  }
  kv.emplace_back(a + ".attention.key_length", u32(c.head_dim, "head_dim"));
  kv.emplace_back(a + ".attention.value_length", u32(c.head_dim, "head_dim"));
  kv.emplace_back(a + ".rope.freq_base", Value::f32(static_cast<float>(c.rope_theta)));
  kv.emplace_back(a + ".attention.layer_norm_rms_epsilon",
                  Value::f32(static_cast<float>(c.rms_norm_eps)));
  if (has_experts(info)) {
    STOA_CHECK(c.norm_topk_prob, ErrorKind::kUnsupported,
               "GGUF export: llama.cpp's lfm2moe always normalises the top-k expert weights "
               "(norm_topk_prob = false)");
    STOA_CHECK(
        c.routed_scaling_factor == 1.0, ErrorKind::kUnsupported,
        "GGUF export: llama.cpp's lfm2moe reads no expert weight scale (routed_scaling_factor"
        " = ",
        c.routed_scaling_factor, ")");
    kv.emplace_back(a + ".expert_count", u32(c.num_experts, "num_experts"));
    kv.emplace_back(a + ".expert_used_count", u32(c.num_experts_per_tok, "num_experts_per_tok"));
    kv.emplace_back(a + ".expert_feed_forward_length",
                    u32(c.moe_intermediate_size, "moe_intermediate_size"));
    kv.emplace_back(a + ".leading_dense_block_count", u32(c.num_dense_layers, "num_dense_layers"));
    kv.emplace_back(a + ".expert_gating_func",
                    Value::u32(2));  // LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID
    kv.emplace_back(a + ".expert_weights_norm", Value::boolean(true));
    kv.emplace_back(a + ".expert_weights_scale", Value::f32(1.0f));
  }
  // A vocabulary-less tokenizer: llama.cpp then creates vocab_size dummy tokens, and the oracle
  // feeds token ids directly, so the tokenizer cannot influence a parity test.
  kv.emplace_back("tokenizer.ggml.model", Value::string("none"));
  if (c.bos_token_id >= 0)
    kv.emplace_back("tokenizer.ggml.bos_token_id", u32(c.bos_token_id, "bos"));
  if (c.eos_token_id >= 0)
    kv.emplace_back("tokenizer.ggml.eos_token_id", u32(c.eos_token_id, "eos"));
  if (c.pad_token_id >= 0)
    kv.emplace_back("tokenizer.ggml.padding_token_id", u32(c.pad_token_id, "pad"));
  return kv;
}

namespace {

class MetaReader {
 public:
  MetaReader(const std::map<std::string, Value>& kv, std::string arch, const std::string& source)
      : kv_(kv), arch_(std::move(arch)), source_(source) {}

  const Value* find(const std::string& key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
  }
  const Value& need(const std::string& key) const {
    const Value* v = find(key);
    STOA_CHECK(v != nullptr, ErrorKind::kBadFormat, source_, ": GGUF metadata key '", key,
               "' is missing");
    return *v;
  }
  int64_t integer(const Value& v, const std::string& key) const {
    STOA_CHECK(v.is_integer(), ErrorKind::kBadFormat, source_, ": GGUF metadata '", key,
               "' must be an integer, got ", gguf::value_type_name(v.type));
    STOA_CHECK(v.i >= 0, ErrorKind::kBadFormat, source_, ": GGUF metadata '", key,
               "' must not be negative, got ", v.i);
    return v.i;
  }
  int64_t arch_int(const std::string& suffix) const {
    std::string key = arch_ + "." + suffix;
    return integer(need(key), key);
  }
  int64_t arch_int_or(const std::string& suffix, int64_t fallback) const {
    std::string key = arch_ + "." + suffix;
    const Value* v = find(key);
    return v ? integer(*v, key) : fallback;
  }
  double arch_float(const std::string& suffix, double fallback) const {
    std::string key = arch_ + "." + suffix;
    const Value* v = find(key);
    if (!v) return fallback;
    STOA_CHECK(v->is_float(), ErrorKind::kBadFormat, source_, ": GGUF metadata '", key,
               "' must be a float, got ", gguf::value_type_name(v->type));
    STOA_CHECK(std::isfinite(v->f), ErrorKind::kBadFormat, source_, ": GGUF metadata '", key,
               "' is not finite");
    if (v->type == ValueType::kF64) return v->f;
    // llama.cpp reads these keys as f32, so they were written rounded to f32. The shortest
    // decimal that rounds to that f32 (e.g. 1e-06) is the value the config originally held.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v->f));
    return std::strtod(std::string(buf, res.ptr).c_str(), nullptr);
  }
  int64_t token_id(const char* key) const {
    const Value* v = find(key);
    return v ? integer(*v, key) : -1;
  }

 private:
  const std::map<std::string, Value>& kv_;
  std::string arch_;
  const std::string& source_;
};

}  // namespace

ModelConfig config_from_gguf(const std::map<std::string, Value>& kv, bool has_output,
                             const std::string& source) {
  auto arch_it = kv.find("general.architecture");
  STOA_CHECK(arch_it != kv.end() && arch_it->second.type == ValueType::kString,
             ErrorKind::kBadFormat, source, ": GGUF has no string 'general.architecture'");
  const std::string& a = arch_it->second.str;
  const ArchInfo* info = find_arch_by_gguf_name(a);
  if (info == nullptr) {
    std::string known;
    for (const ArchInfo* each : all_archs())
      known += cat(known.empty() ? "" : ", ", each->gguf_name);
    fail(ErrorKind::kUnsupported, source, ": GGUF architecture '", a, "' is not one Stoa imports (",
         known, ")");
  }
  ModelConfig c;
  c.arch = info->arch;
  MetaReader m(kv, a, source);
  c.vocab_size = m.arch_int("vocab_size");
  c.max_position_embeddings = m.arch_int("context_length");
  c.hidden_size = m.arch_int("embedding_length");
  c.num_layers = m.arch_int("block_count");
  c.intermediate_size = m.arch_int("feed_forward_length");
  c.num_heads = m.arch_int("attention.head_count");
  STOA_CHECK(c.num_heads > 0, ErrorKind::kBadFormat, source, ": ", a,
             ".attention.head_count must be positive");
  c.head_dim = m.arch_int_or("attention.key_length", c.hidden_size / c.num_heads);
  c.rope_theta = m.arch_float("rope.freq_base", 10000.0);
  c.rms_norm_eps = m.arch_float("attention.layer_norm_rms_epsilon", 1e-6);
  c.tie_word_embeddings = !has_output;
  STOA_CHECK(c.num_layers > 0 && c.num_layers <= 4096, ErrorKind::kBadFormat, source, ": ", a,
             ".block_count = ", c.num_layers, " is out of range");

  const std::string kv_key = a + ".attention.head_count_kv";
  const Value& kv_heads = m.need(kv_key);
  c.layer_kinds.assign(static_cast<size_t>(c.num_layers), LayerKind::kAttention);
  if (kv_heads.type == ValueType::kArray) {
    STOA_CHECK(kv_heads.items.size() == static_cast<size_t>(c.num_layers), ErrorKind::kBadFormat,
               source, ": '", kv_key, "' has ", kv_heads.items.size(), " entries for ",
               c.num_layers, " layers");
    c.num_kv_heads = 0;
    for (size_t l = 0; l < kv_heads.items.size(); ++l) {
      int64_t n = m.integer(kv_heads.items[l], kv_key);
      if (n == 0) {
        c.layer_kinds[l] = LayerKind::kConv;
      } else {
        STOA_CHECK(c.num_kv_heads == 0 || c.num_kv_heads == n, ErrorKind::kUnsupported, source,
                   ": '", kv_key, "' varies between attention layers");
        c.num_kv_heads = n;
      }
    }
  } else {
    c.num_kv_heads = m.integer(kv_heads, kv_key);
  }
  if (!has_conv_layers(*info)) {
    for (LayerKind kind : c.layer_kinds)
      STOA_CHECK(kind == LayerKind::kAttention, ErrorKind::kBadFormat, source, ": ", a,
                 " GGUF marks a layer with head_count_kv = 0");
  } else {
    c.conv_kernel = m.arch_int("shortconv.l_cache");
    c.conv_bias = false;
  }
  if (has_experts(*info)) {
    c.num_experts = m.arch_int("expert_count");
    c.num_experts_per_tok = m.arch_int("expert_used_count");
    c.moe_intermediate_size = m.arch_int("expert_feed_forward_length");
    c.num_dense_layers = m.arch_int_or("leading_dense_block_count", 0);
    int64_t gating = m.arch_int_or("expert_gating_func", 2);
    STOA_CHECK(gating == 2, ErrorKind::kUnsupported, source, ": ", a,
               " expert_gating_func = ", gating, ", Stoa implements only 2 (sigmoid)");
    c.norm_topk_prob = true;   // llama.cpp's lfm2moe always normalises
    c.use_expert_bias = true;  // llama.cpp requires exp_probs_b
    c.routed_scaling_factor = 1.0;
  }
  c.bos_token_id = m.token_id("tokenizer.ggml.bos_token_id");
  c.eos_token_id = m.token_id("tokenizer.ggml.eos_token_id");
  c.pad_token_id = m.token_id("tokenizer.ggml.padding_token_id");
  validate_model_config(c, source);
  return c;
}

}  // namespace stoa
