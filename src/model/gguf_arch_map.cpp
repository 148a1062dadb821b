#include "model/gguf_arch_map.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "core/error.h"
#include "model/weights.h"

namespace stoa {

using gguf::Value;
using gguf::ValueType;

const char* gguf_arch_name(Arch arch) {
  switch (arch) {
    case Arch::kQwen3:
      return "qwen3";
    case Arch::kLfm2:
      return "lfm2";
    case Arch::kLfm2Moe:
      return "lfm2moe";
  }
  fail(ErrorKind::kInternal, "unknown Arch ", static_cast<int>(arch));
}

namespace {

struct NameRule {
  const char* hf_suffix;  // after "model.layers.N."
  const char* gguf_suffix;
  bool matrix;
};

// Per-layer tensors. The router (`ffn_gate_inp`) stays F32 as llama.cpp's own quantizer keeps it:
// expert choice is a discrete decision that a rounded router would flip.
const std::vector<NameRule>& layer_rules(Arch arch) {
  static const std::vector<NameRule> qwen3 = {
      {"input_layernorm.weight", "attn_norm.weight", false},
      {"self_attn.q_proj.weight", "attn_q.weight", true},
      {"self_attn.k_proj.weight", "attn_k.weight", true},
      {"self_attn.v_proj.weight", "attn_v.weight", true},
      {"self_attn.o_proj.weight", "attn_output.weight", true},
      {"self_attn.q_norm.weight", "attn_q_norm.weight", false},
      {"self_attn.k_norm.weight", "attn_k_norm.weight", false},
      {"post_attention_layernorm.weight", "ffn_norm.weight", false},
      {"mlp.gate_proj.weight", "ffn_gate.weight", true},
      {"mlp.up_proj.weight", "ffn_up.weight", true},
      {"mlp.down_proj.weight", "ffn_down.weight", true},
  };
  static const std::vector<NameRule> lfm2 = {
      {"operator_norm.weight", "attn_norm.weight", false},
      {"ffn_norm.weight", "ffn_norm.weight", false},
      {"self_attn.q_proj.weight", "attn_q.weight", true},
      {"self_attn.k_proj.weight", "attn_k.weight", true},
      {"self_attn.v_proj.weight", "attn_v.weight", true},
      {"self_attn.out_proj.weight", "attn_output.weight", true},
      {"self_attn.q_layernorm.weight", "attn_q_norm.weight", false},
      {"self_attn.k_layernorm.weight", "attn_k_norm.weight", false},
      {"conv.in_proj.weight", "shortconv.in_proj.weight", true},
      {"conv.out_proj.weight", "shortconv.out_proj.weight", true},
      {"conv.conv.weight", "shortconv.conv.weight", false},
      {"feed_forward.w1.weight", "ffn_gate.weight", true},
      {"feed_forward.w3.weight", "ffn_up.weight", true},
      {"feed_forward.w2.weight", "ffn_down.weight", true},
      {"feed_forward.gate.weight", "ffn_gate_inp.weight", false},
      {"feed_forward.expert_bias", "exp_probs_b.bias", false},
  };
  return arch == Arch::kQwen3 ? qwen3 : lfm2;
}

struct GlobalRule {
  const char* hf_name;
  const char* gguf_name;
  bool matrix;
};

const std::vector<GlobalRule>& global_rules(Arch arch) {
  static const std::vector<GlobalRule> qwen3 = {
      {"model.embed_tokens.weight", "token_embd.weight", true},
      {"model.norm.weight", "output_norm.weight", false},
      {"lm_head.weight", "output.weight", true},
  };
  static const std::vector<GlobalRule> lfm2 = {
      {"model.embed_tokens.weight", "token_embd.weight", true},
      {"model.embedding_norm.weight", "token_embd_norm.weight", false},
      {"lm_head.weight", "output.weight", true},
  };
  return arch == Arch::kQwen3 ? qwen3 : lfm2;
}

// "model.layers.12.rest" -> (12, "rest").
std::optional<std::pair<int64_t, std::string>> split_layer_name(const std::string& name) {
  static const std::string prefix = "model.layers.";
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return std::nullopt;
  int64_t layer = 0;
  for (size_t k = prefix.size(); k < dot; ++k) {
    if (name[k] < '0' || name[k] > '9') return std::nullopt;
    layer = layer * 10 + (name[k] - '0');
  }
  return std::make_pair(layer, name.substr(dot + 1));
}

// "feed_forward.experts.7.w1.weight" -> (7, "w1").
std::optional<std::pair<int64_t, std::string>> split_expert_name(const std::string& rest) {
  static const std::string prefix = "feed_forward.experts.";
  static const std::string suffix = ".weight";
  if (rest.rfind(prefix, 0) != 0 || rest.size() <= prefix.size() + suffix.size())
    return std::nullopt;
  if (rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) != 0) return std::nullopt;
  std::string mid = rest.substr(prefix.size(), rest.size() - prefix.size() - suffix.size());
  size_t dot = mid.find('.');
  if (dot == std::string::npos || dot == 0) return std::nullopt;
  int64_t expert = 0;
  for (size_t k = 0; k < dot; ++k) {
    if (mid[k] < '0' || mid[k] > '9') return std::nullopt;
    expert = expert * 10 + (mid[k] - '0');
  }
  return std::make_pair(expert, mid.substr(dot + 1));
}

const char* merged_expert_name(const std::string& w) {
  if (w == "w1") return "ffn_gate_exps.weight";
  if (w == "w3") return "ffn_up_exps.weight";
  if (w == "w2") return "ffn_down_exps.weight";
  return nullptr;
}

}  // namespace

std::vector<GgufTensorPlan> gguf_tensor_plan(const ModelConfig& config) {
  std::vector<GgufTensorPlan> plan;
  std::map<std::string, size_t> merged_index;  // gguf name -> plan index (experts)
  for (const TensorSpec& spec : expected_tensors(config)) {
    const std::string& name = spec.name;
    bool mapped = false;
    for (const GlobalRule& rule : global_rules(config.arch)) {
      if (name != rule.hf_name) continue;
      plan.push_back({rule.gguf_name, spec.shape, {name}, {spec.shape}, rule.matrix});
      mapped = true;
      break;
    }
    if (mapped) continue;
    auto layer = split_layer_name(name);
    STOA_CHECK(layer.has_value(), ErrorKind::kUnsupported, "GGUF export: tensor '", name, "' of ",
               arch_name(config.arch), " has no llama.cpp counterpart");
    std::string blk = cat("blk.", layer->first, ".");
    if (auto expert = split_expert_name(layer->second)) {
      const char* merged = merged_expert_name(expert->second);
      STOA_CHECK(merged != nullptr && config.arch == Arch::kLfm2Moe, ErrorKind::kUnsupported,
                 "GGUF export: expert tensor '", name, "' has no llama.cpp counterpart");
      std::string gguf_name = blk + merged;
      auto it = merged_index.find(gguf_name);
      if (it == merged_index.end()) {
        GgufTensorPlan entry{gguf_name, {}, {}, {}, true};
        merged_index[gguf_name] = plan.size();
        plan.push_back(std::move(entry));
        it = merged_index.find(gguf_name);
      }
      GgufTensorPlan& entry = plan[it->second];
      STOA_CHECK(expert->first == static_cast<int64_t>(entry.sources.size()), ErrorKind::kInternal,
                 "experts of ", gguf_name, " are not listed in order at '", name, "'");
      STOA_CHECK(entry.source_shapes.empty() || entry.source_shapes.front() == spec.shape,
                 ErrorKind::kInternal, "experts of ", gguf_name, " differ in shape at '", name,
                 "'");
      entry.sources.push_back(name);
      entry.source_shapes.push_back(spec.shape);
      entry.shape = spec.shape;
      entry.shape.insert(entry.shape.begin(), static_cast<int64_t>(entry.sources.size()));
      continue;
    }
    for (const NameRule& rule : layer_rules(config.arch)) {
      if (layer->second != rule.hf_suffix) continue;
      Shape shape = spec.shape;
      // HF keeps the depthwise conv kernel as [H, 1, L]; llama.cpp wants it squeezed to [H, L].
      if (layer->second == "conv.conv.weight" && shape.size() == 3 && shape[1] == 1)
        shape = {shape[0], shape[2]};
      plan.push_back({blk + rule.gguf_suffix, shape, {name}, {spec.shape}, rule.matrix});
      mapped = true;
      break;
    }
    STOA_CHECK(mapped, ErrorKind::kUnsupported, "GGUF export: tensor '", name, "' of ",
               arch_name(config.arch), " has no llama.cpp counterpart");
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
  if (c.arch == Arch::kQwen3) {
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
  if (c.arch == Arch::kLfm2Moe) {
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
  ModelConfig c;
  if (a == "qwen3") {
    c.arch = Arch::kQwen3;
  } else if (a == "lfm2") {
    c.arch = Arch::kLfm2;
  } else if (a == "lfm2moe") {
    c.arch = Arch::kLfm2Moe;
  } else {
    fail(ErrorKind::kUnsupported, source, ": GGUF architecture '", a,
         "' is not one Stoa imports (qwen3, lfm2, lfm2moe)");
  }
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
  if (c.arch == Arch::kQwen3) {
    for (LayerKind kind : c.layer_kinds)
      STOA_CHECK(kind == LayerKind::kAttention, ErrorKind::kBadFormat, source,
                 ": qwen3 GGUF marks a layer with head_count_kv = 0");
  } else {
    c.conv_kernel = m.arch_int("shortconv.l_cache");
    c.conv_bias = false;
  }
  if (c.arch == Arch::kLfm2Moe) {
    c.num_experts = m.arch_int("expert_count");
    c.num_experts_per_tok = m.arch_int("expert_used_count");
    c.moe_intermediate_size = m.arch_int("expert_feed_forward_length");
    c.num_dense_layers = m.arch_int_or("leading_dense_block_count", 0);
    int64_t gating = m.arch_int_or("expert_gating_func", 2);
    STOA_CHECK(gating == 2, ErrorKind::kUnsupported, source,
               ": lfm2moe expert_gating_func = ", gating, ", Stoa implements only 2 (sigmoid)");
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
