// safetensors round trips (every dtype, metadata, layout conventions), sharded directories and
// model directory load/save.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "model/presets.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "support/temp_dir.h"

namespace stoa {
namespace {

using testing::TempDir;

Tensor patterned(DType dtype, Shape shape, uint8_t salt) {
  Tensor t(dtype, std::move(shape));
  auto* bytes = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(i * 31 + salt);
  return t;
}

uint64_t header_length(const std::vector<uint8_t>& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
  return n;
}

TEST(Safetensors, RoundTripEveryDtype) {
  std::vector<Tensor> tensors;
  std::vector<NamedView> views;
  const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kI8,
                          DType::kU8,  DType::kI32,  DType::kI64};
  // Odd element counts, so a naive layout would misalign the wider types.
  for (DType d : dtypes) tensors.push_back(patterned(d, {3, 5}, static_cast<uint8_t>(d)));
  tensors.push_back(patterned(DType::kF32, {0, 4}, 0));  // empty tensors are legal
  tensors.push_back(patterned(DType::kU8, {}, 9));       // a scalar
  for (size_t i = 0; i < tensors.size(); ++i) {
    views.emplace_back(cat("t", i, ".", dtype_name(tensors[i].dtype())), tensors[i].view());
  }
  TempDir dir("st");
  std::string path = dir.file("all.safetensors");
  write_safetensors(path, views, {{"format", "pt"}, {"note", "hello"}});
  SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "hello");
  ASSERT_EQ(file.entries().size(), views.size());
  for (size_t i = 0; i < views.size(); ++i) {
    SCOPED_TRACE(views[i].first);
    TensorView v = file.view(views[i].first);
    EXPECT_EQ(v.dtype, tensors[i].dtype());
    EXPECT_EQ(v.shape, tensors[i].shape());
    EXPECT_TRUE(file.is_aligned(views[i].first));
    EXPECT_EQ(hash_tensor(v), hash_tensor(tensors[i].view()));
    EXPECT_EQ(hash_tensor(file.load(views[i].first).view()), hash_tensor(tensors[i].view()));
  }
  // The same bytes in memory and on disk; the header is padded to 8 bytes.
  std::vector<uint8_t> bytes = serialize_safetensors(views, {{"format", "pt"}, {"note", "hello"}});
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> on_disk((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(bytes, on_disk);
  EXPECT_EQ((8 + header_length(bytes)) % 8, 0u);
  SafetensorsFile mem = SafetensorsFile::from_bytes(bytes, "memory");
  EXPECT_EQ(mem.entries().size(), views.size());
}

TEST(Safetensors, ReadsAHandWrittenFile) {
  // Written the way the Python library does: no padding, explicit offsets, a u8 tensor first.
  std::string header =
      R"({"b":{"dtype":"F16","shape":[2],"data_offsets":[2,6]},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
  std::vector<uint8_t> bytes(8);
  bytes[0] = static_cast<uint8_t>(header.size());
  bytes.insert(bytes.end(), header.begin(), header.end());
  for (uint8_t b : {7, 8, 0x00, 0x3c, 0x00, 0xc0}) bytes.push_back(b);  // f16 1.0, -2.0
  SafetensorsFile file = SafetensorsFile::from_bytes(bytes, "hand");
  EXPECT_EQ(file.entries()[0].name, "a");  // sorted by name
  EXPECT_EQ(file.view("a").as<uint8_t>()[1], 8);
  Tensor b = to_f32(file.load("b").view());
  EXPECT_EQ(b.as<float>()[0], 1.0f);
  EXPECT_EQ(b.as<float>()[1], -2.0f);
  EXPECT_TRUE(file.metadata().empty());
  EXPECT_THROW(file.view("c"), Error);
}

TEST(ModelDir, RoundTripF32AndBf16) {
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"}) {
    SCOPED_TRACE(preset);
    ModelWeights w = random_weights(preset_config(preset), 3);
    TempDir dir("md");
    save_model_dir(w, dir.path());
    ModelWeights back = load_model_dir(dir.path());
    EXPECT_EQ(model_config_to_json(back.config), model_config_to_json(w.config));
    ASSERT_EQ(back.tensors.size(), w.tensors.size());
    for (const auto& [name, t] : w.tensors) {
      EXPECT_EQ(hash_tensor(back.at(name).view()), hash_tensor(t.view())) << name;
    }

    save_model_dir(w, dir.path(), DType::kBF16);
    SafetensorsFile file = SafetensorsFile::open(dir.file("model.safetensors"));
    EXPECT_EQ(file.metadata().at("format"), "pt");
    ModelWeights half = load_model_dir(dir.path());
    for (const auto& [name, t] : w.tensors) {
      const float* a = t.as<float>();
      const float* b = half.at(name).as<float>();
      bool exact = name.ends_with("expert_bias");  // kept in f32
      EXPECT_EQ(file.find(name)->dtype, exact ? DType::kF32 : DType::kBF16) << name;
      for (int64_t i = 0; i < t.numel(); ++i) {
        ASSERT_EQ(b[i], exact ? a[i] : bf16_to_f32(f32_to_bf16(a[i]))) << name;
      }
    }
  }
}

TEST(ModelDir, ShardedWithIndex) {
  ModelConfig c = preset_config("tiny-lfm2");
  ModelWeights w = random_weights(c, 5);
  TempDir dir("shard");
  std::vector<NamedView> first, second;
  nlohmann::json map = nlohmann::json::object();
  size_t i = 0;
  for (const auto& [name, t] : w.tensors) {
    bool in_first = i++ % 2 == 0;
    (in_first ? first : second).emplace_back(name, t.view());
    map[name] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_safetensors(dir.file("model-00001-of-00002.safetensors"), first, {{"format", "pt"}});
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), second, {{"format", "pt"}});
  std::ofstream(dir.file("model.safetensors.index.json"))
      << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump();
  std::ofstream(dir.file("config.json")) << model_config_to_json(c).dump();
  ModelWeights back = load_model_dir(dir.path());
  for (const auto& [name, t] : w.tensors) {
    EXPECT_EQ(hash_tensor(back.at(name).view()), hash_tensor(t.view())) << name;
  }
}

TEST(ModelDir, AcceptsCheckpointQuirks) {
  // A tied checkpoint that also stores lm_head, a rotary buffer, and LFM2.5's spelling of the
  // routing bias all load.
  ModelConfig c = preset_config("tiny-lfm2moe");
  ModelWeights w = random_weights(c, 2);
  TempDir dir("quirks");
  std::vector<NamedView> views;
  for (const auto& [name, t] : w.tensors) {
    views.emplace_back(name.ends_with("expert_bias") ? name + ".weight" : name, t.view());
  }
  views.emplace_back("lm_head.weight", w.at("model.embed_tokens.weight").view());
  Tensor inv_freq(DType::kF32, {8});
  views.emplace_back("model.layers.1.self_attn.rotary_emb.inv_freq", inv_freq.view());
  write_safetensors(dir.file("model.safetensors"), views);
  std::ofstream(dir.file("config.json")) << model_config_to_json(c).dump();
  ModelWeights back = load_model_dir(dir.path());
  EXPECT_EQ(back.tensors.size(), w.tensors.size());
  EXPECT_EQ(hash_tensor(back.at("model.layers.2.feed_forward.expert_bias").view()),
            hash_tensor(w.at("model.layers.2.feed_forward.expert_bias").view()));
}

}  // namespace
}  // namespace stoa
