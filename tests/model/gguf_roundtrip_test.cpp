// GGUF writer + reader: every value type and tensor type survives a round trip; each tiny preset
// exports with llama.cpp's names and imports back to identical tensors (F32 bit for bit, F16 as
// the f16 rounding, Q8_0 as exactly our int8 grid); unsupported settings are refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <set>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "core/int8_grid.h"
#include "model/gguf_arch_map.h"
#include "model/gguf_reader.h"
#include "model/gguf_writer.h"
#include "model/presets.h"
#include "model/weights.h"
#include "support/param_names.h"

namespace stoa {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;
using gguf::Value;
using gguf::ValueType;

std::string temp_path(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / cat("stoa_gguf_test_", ::getpid());
  fs::create_directories(dir);
  return (dir / name).string();
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(GgufWriter, EveryValueAndTensorTypeRoundTrips) {
  GgufWriter w;
  w.set("a.u32", Value::u32(4000000000u));
  w.set("a.i32", Value::i32(-7));
  w.set("a.u64", Value::u64(1ull << 40));
  w.set("a.f32", Value::f32(0.25f));
  w.set("a.bool", Value::boolean(true));
  w.set("a.str", Value::string("héllo"));
  w.set("a.arr_i32", Value::array_i32({0, 4, 0, -2}));
  w.set("a.arr_str", Value::array_string({"x", "", "yz"}));
  w.set("a.arr_f32", Value::array_f32({1.5f, -2.0f}));
  w.set("a.i32", Value::i32(-8));  // replaces in place
  std::vector<float> f32 = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> f32_bytes(f32.size() * 4);
  std::memcpy(f32_bytes.data(), f32.data(), f32_bytes.size());
  w.add_tensor("t.f32", GgmlType::kF32, {3, 2}, f32_bytes);
  std::vector<uint8_t> f16_bytes(5 * 2);
  for (int k = 0; k < 5; ++k) {
    uint16_t h = f32_to_f16(0.5f * static_cast<float>(k));
    std::memcpy(f16_bytes.data() + 2 * k, &h, 2);
  }
  w.add_tensor("t.f16", GgmlType::kF16, {5}, f16_bytes);
  std::vector<uint8_t> q8(2 * gguf::kQ8BlockBytes);
  for (size_t k = 0; k < q8.size(); ++k) q8[k] = static_cast<uint8_t>(k * 7);
  uint16_t d = f32_to_f16(0.125f);
  std::memcpy(q8.data(), &d, 2);
  std::memcpy(q8.data() + gguf::kQ8BlockBytes, &d, 2);
  w.add_tensor("t.q8", GgmlType::kQ8_0, {32, 2}, q8);
  EXPECT_THROW(w.add_tensor("t.bad", GgmlType::kQ8_0, {31}, {}), Error);
  std::string path = temp_path("values.gguf");
  w.write(path);

  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata().size(), 9u);
  EXPECT_EQ(f.find_value("a.u32")->i, 4000000000ll);
  EXPECT_EQ(f.find_value("a.i32")->i, -8);
  EXPECT_EQ(f.find_value("a.u64")->i, 1ll << 40);
  EXPECT_EQ(f.find_value("a.f32")->f, 0.25);
  EXPECT_EQ(f.find_value("a.bool")->i, 1);
  EXPECT_EQ(f.find_value("a.str")->str, "héllo");
  const Value* arr = f.find_value("a.arr_i32");
  ASSERT_EQ(arr->items.size(), 4u);
  EXPECT_EQ(arr->array_type, ValueType::kI32);
  EXPECT_EQ(arr->items[3].i, -2);
  EXPECT_EQ(f.find_value("a.arr_str")->items[2].str, "yz");
  EXPECT_EQ(f.find_value("a.arr_f32")->items[1].f, -2.0);
  ASSERT_EQ(f.tensors().size(), 3u);
  for (const GgufTensorInfo& t : f.tensors()) EXPECT_EQ(t.offset % 32, 0u) << t.name;
  Tensor t32 = f.read_f32(*f.find_tensor("t.f32"));
  EXPECT_EQ(t32.shape(), (Shape{2, 3}));
  EXPECT_EQ(std::memcmp(t32.data(), f32.data(), 24), 0);
  Tensor t16 = f.read_f32(*f.find_tensor("t.f16"));
  EXPECT_EQ(t16.as<float>()[4], 2.0f);
  Int8Matrix m = f.read_q8(*f.find_tensor("t.q8"));
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 32);
  EXPECT_EQ(m.scales[1], d);
  EXPECT_EQ(static_cast<uint8_t>(m.values[40]), q8[gguf::kQ8BlockBytes + 2 + 8]);
  fs::remove(path);
}

class GgufPreset : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufPreset, NamesFollowLlamaCpp) {
  ModelConfig c = preset_config(GetParam());
  std::vector<GgufTensorPlan> plan = gguf_tensor_plan(c);
  std::map<std::string, const GgufTensorPlan*> by_name;
  size_t sources = 0;
  for (const GgufTensorPlan& p : plan) {
    EXPECT_TRUE(by_name.emplace(p.gguf_name, &p).second) << "duplicate " << p.gguf_name;
    sources += p.sources.size();
  }
  EXPECT_EQ(sources, expected_tensors(c).size())
      << "every HF tensor maps to exactly one GGUF tensor";
  ASSERT_TRUE(by_name.count("token_embd.weight"));
  EXPECT_EQ(by_name.count("output.weight"), c.tie_word_embeddings ? 0u : 1u);
  if (c.arch == Arch::kQwen3) {
    EXPECT_TRUE(by_name.count("output_norm.weight"));
    EXPECT_TRUE(by_name.count("blk.0.attn_q_norm.weight"));
    EXPECT_EQ(by_name.at("blk.0.attn_q.weight")->shape,
              (Shape{c.num_heads * c.head_dim, c.hidden_size}));
  } else {
    EXPECT_TRUE(by_name.count("token_embd_norm.weight"));  // LFM2's final norm in llama.cpp
    for (int64_t l = 0; l < c.num_layers; ++l) {
      std::string b = cat("blk.", l, ".");
      if (c.is_attention_layer(l)) {
        EXPECT_TRUE(by_name.count(b + "attn_k_norm.weight")) << b;
      } else {
        ASSERT_TRUE(by_name.count(b + "shortconv.conv.weight")) << b;
        EXPECT_EQ(by_name.at(b + "shortconv.conv.weight")->shape,
                  (Shape{c.hidden_size, c.conv_kernel}));
        EXPECT_FALSE(by_name.at(b + "shortconv.conv.weight")->matrix);
      }
      if (c.is_moe_layer(l)) {
        const GgufTensorPlan* down = by_name.at(b + "ffn_down_exps.weight");
        EXPECT_EQ(down->shape, (Shape{c.num_experts, c.hidden_size, c.moe_intermediate_size}));
        EXPECT_EQ(down->sources.size(), static_cast<size_t>(c.num_experts));
        EXPECT_EQ(down->sources[1], cat("model.layers.", l, ".feed_forward.experts.1.w2.weight"));
        EXPECT_TRUE(by_name.count(b + "exp_probs_b.bias"));
        EXPECT_FALSE(by_name.at(b + "ffn_gate_inp.weight")->matrix);  // the router stays f32
      } else {
        EXPECT_TRUE(by_name.count(b + "ffn_gate.weight")) << b;
      }
    }
  }
  // Metadata llama.cpp requires.
  std::map<std::string, Value> kv;
  for (auto& [k, v] : gguf_metadata(c)) kv.emplace(k, v);
  std::string a = gguf_arch_name(c.arch);
  EXPECT_EQ(kv.at("general.architecture").str, a);
  EXPECT_EQ(kv.at(a + ".block_count").i, c.num_layers);
  EXPECT_EQ(kv.at(a + ".vocab_size").i, c.vocab_size);
  EXPECT_EQ(kv.at("tokenizer.ggml.model").str, "none");
  if (c.arch != Arch::kQwen3) {
    const Value& kvh = kv.at(a + ".attention.head_count_kv");
    ASSERT_EQ(kvh.items.size(), static_cast<size_t>(c.num_layers));
    for (int64_t l = 0; l < c.num_layers; ++l)
      EXPECT_EQ(kvh.items[static_cast<size_t>(l)].i, c.is_attention_layer(l) ? c.num_kv_heads : 0);
    EXPECT_EQ(kv.at(a + ".shortconv.l_cache").i, c.conv_kernel);
  }
  if (c.arch == Arch::kLfm2Moe) {
    EXPECT_EQ(kv.at(a + ".expert_gating_func").i, 2);  // sigmoid
    EXPECT_EQ(kv.at(a + ".leading_dense_block_count").i, c.num_dense_layers);
    EXPECT_EQ(kv.at(a + ".expert_used_count").i, c.num_experts_per_tok);
  }
}

TEST_P(GgufPreset, F32RoundTripIsExact) {
  ModelWeights w = random_weights(preset_config(GetParam()), 7);
  std::string path = temp_path(GetParam() + ".f32.gguf");
  GgufExportOptions opts;
  opts.model_name = "test";
  export_gguf(w, path, opts);
  ModelWeights back = import_gguf(path);
  EXPECT_EQ(model_config_to_json(back.config), model_config_to_json(w.config));
  ASSERT_EQ(back.tensors.size(), w.tensors.size());
  for (const auto& [name, t] : w.tensors) {
    ASSERT_TRUE(back.has(name)) << name;
    EXPECT_TRUE(same_bytes(t, back.at(name))) << name;
  }
  fs::remove(path);
}

TEST_P(GgufPreset, F16RoundTripIsTheF16Rounding) {
  ModelWeights w = random_weights(preset_config(GetParam()), 8);
  std::string path = temp_path(GetParam() + ".f16.gguf");
  GgufExportOptions opts;
  opts.type = GgufExportType::kF16;
  export_gguf(w, path, opts);
  GgufFile file = GgufFile::open(path);
  ModelWeights back = import_gguf(file);
  std::set<std::string> f32_names;
  for (const GgufTensorPlan& p : gguf_tensor_plan(w.config))
    if (!p.matrix)
      for (const std::string& s : p.sources) f32_names.insert(s);
  for (const auto& [name, t] : w.tensors) {
    const float* a = t.as<float>();
    const float* b = back.at(name).as<float>();
    bool keep = f32_names.count(name) != 0;
    for (int64_t k = 0; k < t.numel(); ++k) {
      float expect = keep ? a[k] : f16_to_f32(f32_to_f16(a[k]));
      ASSERT_EQ(f32_bits(b[k]), f32_bits(expect)) << name << "[" << k << "]";
    }
  }
  EXPECT_EQ(file.find_tensor("token_embd.weight")->type, GgmlType::kF16);
  fs::remove(path);
}

TEST_P(GgufPreset, Q8RoundTripIsOurInt8GridBitForBit) {
  ModelWeights w = random_weights(preset_config(GetParam()), 9);
  // One matrix arrives already on a (frozen) grid whose scales are not the fresh ones: the
  // exporter must write it verbatim rather than requantize.
  std::map<std::string, Int8Matrix> given;
  const std::string frozen = "model.embed_tokens.weight";
  const Tensor& e = w.at(frozen);
  std::vector<uint16_t> scales(static_cast<size_t>(e.numel() / 32), f32_to_f16(0.01f));
  given[frozen] = int8_quantize_with_scales(e.as<float>(), e.dim(0), e.dim(1), scales);
  std::string path = temp_path(GetParam() + ".q8.gguf");
  GgufExportOptions opts;
  opts.type = GgufExportType::kQ8_0;
  opts.int8 = &given;
  export_gguf(w, path, opts);
  std::map<std::string, Int8Matrix> int8;
  ModelWeights back = import_gguf(path, &int8);
  std::set<std::string> matrices;
  for (const GgufTensorPlan& p : gguf_tensor_plan(w.config))
    if (p.matrix)
      for (const std::string& s : p.sources) matrices.insert(s);
  ASSERT_EQ(int8.size(), matrices.size());
  for (const auto& [name, t] : w.tensors) {
    if (!matrices.count(name)) {
      EXPECT_TRUE(same_bytes(t, back.at(name))) << name;  // norms, conv, router, bias: f32
      continue;
    }
    int64_t cols = t.shape().back(), rows = t.numel() / cols;
    Int8Matrix expect = name == frozen ? given.at(name) : int8_quantize(t.as<float>(), rows, cols);
    const Int8Matrix& got = int8.at(name);
    ASSERT_EQ(got.values, expect.values) << name;
    ASSERT_EQ(got.scales, expect.scales) << name;
    std::vector<float> deq(static_cast<size_t>(t.numel()));
    int8_dequantize(expect, deq.data());
    EXPECT_EQ(std::memcmp(deq.data(), back.at(name).data(), deq.size() * 4), 0) << name;
  }
  fs::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Tiny, GgufPreset,
                         ::testing::Values("tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"),
                         stoa::test::PresetParamName());

TEST(GgufExport, RefusesWhatLlamaCppCannotRepresent) {
  ModelConfig c = preset_config("tiny-lfm2moe");
  c.routed_scaling_factor = 2.0;
  EXPECT_THROW(gguf_metadata(c), Error);
  c = preset_config("tiny-lfm2moe");
  c.norm_topk_prob = false;
  EXPECT_THROW(gguf_metadata(c), Error);
  EXPECT_THROW(parse_gguf_export_type("q4_k"), Error);
  EXPECT_EQ(parse_gguf_export_type("Q8_0"), GgufExportType::kQ8_0);
}

TEST(GgufExport, MoeWithoutExpertBiasGetsZeroBias) {
  ModelConfig c = preset_config("tiny-lfm2moe");
  c.use_expert_bias = false;
  ModelWeights w = random_weights(c, 3);
  std::string path = temp_path("nobias.gguf");
  export_gguf(w, path);
  GgufFile f = GgufFile::open(path);
  const GgufTensorInfo* bias = f.find_tensor(cat("blk.", c.num_layers - 1, ".exp_probs_b.bias"));
  ASSERT_NE(bias, nullptr);
  Tensor b = f.read_f32(*bias);
  for (int64_t k = 0; k < b.numel(); ++k) EXPECT_EQ(b.as<float>()[k], 0.0f);
  fs::remove(path);
}

}  // namespace
}  // namespace stoa
