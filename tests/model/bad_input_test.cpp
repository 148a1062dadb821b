// Bad input (CTest label `fault`, also run under ASan/UBSan): malformed config.json files,
// truncated and byte-flipped safetensors files, inconsistent model directories. Each must give
// a stoa::Error naming the file and what is wrong — never a crash, never a silent success.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/presets.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "support/temp_dir.h"

namespace stoa {
namespace {

using testing::TempDir;

// Runs fn, expects an Error of `kind` whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn&& fn, ErrorKind kind, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message '" << e.what() << "' lacks '" << part << "'";
    }
  }
}

nlohmann::json base_config() {
  return model_config_to_json(preset_config("tiny-lfm2moe"));
}

void expect_config_error(const nlohmann::json& j, ErrorKind kind,
                         std::initializer_list<std::string> parts) {
  expect_error([&] { parse_model_config(j.dump(), "bad/config.json"); }, kind, parts);
}

TEST(BadConfig, NotJsonOrNotAnObject) {
  expect_error([] { parse_model_config("{\"model_type\": \"qwen3\",", "c.json"); },
               ErrorKind::kBadFormat, {"c.json", "not valid JSON"});
  expect_error([] { parse_model_config("[1, 2]", "c.json"); }, ErrorKind::kBadFormat,
               {"c.json", "object"});
  expect_error([] { parse_model_config("", "c.json"); }, ErrorKind::kBadFormat, {"c.json"});
}

TEST(BadConfig, ModelType) {
  nlohmann::json j = base_config();
  j.erase("model_type");
  expect_config_error(j, ErrorKind::kBadFormat, {"bad/config.json", "model_type"});
  j["model_type"] = "llama";
  expect_config_error(j, ErrorKind::kUnsupported, {"bad/config.json", "llama", "lfm2_moe"});
  j["model_type"] = 3;
  expect_config_error(j, ErrorKind::kBadFormat, {"model_type", "string"});
}

TEST(BadConfig, MissingAndMistypedFields) {
  for (const char* field : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                            "intermediate_size"}) {
    SCOPED_TRACE(field);
    nlohmann::json j = base_config();
    j.erase(field);
    expect_config_error(j, ErrorKind::kBadFormat, {"bad/config.json", "missing", field});
    j[field] = "64";
    expect_config_error(j, ErrorKind::kBadFormat, {"bad/config.json", field, "integer"});
    j[field] = 64.5;
    expect_config_error(j, ErrorKind::kBadFormat, {field, "integer"});
    j[field] = 0;
    expect_config_error(j, ErrorKind::kBadFormat, {field, "got 0"});
    j[field] = -5;
    expect_config_error(j, ErrorKind::kBadFormat, {field, "got -5"});
    j[field] = uint64_t{1} << 63;
    expect_config_error(j, ErrorKind::kBadFormat, {field});
  }
  nlohmann::json j = base_config();
  j["tie_word_embeddings"] = "yes";
  expect_config_error(j, ErrorKind::kBadFormat, {"tie_word_embeddings", "true or false"});
  j = base_config();
  j["norm_eps"] = "small";
  expect_config_error(j, ErrorKind::kBadFormat, {"norm_eps", "number"});
  j = base_config();
  j["norm_eps"] = -1.0;
  expect_config_error(j, ErrorKind::kBadFormat, {"epsilon"});
  j = base_config();
  j["eos_token_id"] = 100000;
  expect_config_error(j, ErrorKind::kBadFormat, {"eos_token_id", "vocab"});
  j = base_config();
  j["bos_token_id"] = -3;
  expect_config_error(j, ErrorKind::kBadFormat, {"bos_token_id"});
}

TEST(BadConfig, InconsistentShapes) {
  nlohmann::json j = base_config();
  j["num_key_value_heads"] = 3;  // 4 heads
  expect_config_error(j, ErrorKind::kBadFormat, {"bad/config.json", "num_key_value_heads"});
  j = base_config();
  j["num_attention_heads"] = 6;  // 64 / 6
  expect_config_error(j, ErrorKind::kBadFormat, {"num_attention_heads"});
  j = base_config();
  j["layer_types"].push_back("conv");
  expect_config_error(j, ErrorKind::kBadFormat, {"layer_types", "5 entries", "4"});
  j = base_config();
  j["layer_types"][1] = "mamba";
  expect_config_error(j, ErrorKind::kBadFormat, {"layer_types[1]", "mamba"});
  j = base_config();
  j["layer_types"] = "conv";
  expect_config_error(j, ErrorKind::kBadFormat, {"layer_types", "list"});
  j = base_config();
  j["num_experts_per_tok"] = 9;  // 8 experts
  expect_config_error(j, ErrorKind::kBadFormat, {"num_experts_per_tok"});
  j = base_config();
  j["num_dense_layers"] = 5;
  expect_config_error(j, ErrorKind::kBadFormat, {"num_dense_layers"});
  j = base_config();
  j["head_dim"] = 15;
  expect_config_error(j, ErrorKind::kBadFormat, {"head_dim", "odd"});
  j = base_config();
  j["conv_L_cache"] = 0;
  expect_config_error(j, ErrorKind::kBadFormat, {"conv_L_cache"});
  j = base_config();
  j["num_experts"] = 1 << 20;
  expect_config_error(j, ErrorKind::kBadFormat, {"num_experts"});

  nlohmann::json lfm2 = model_config_to_json(preset_config("tiny-lfm2"));
  lfm2.erase("layer_types");
  lfm2["full_attn_idxs"] = {1, 9};
  expect_config_error(lfm2, ErrorKind::kBadFormat, {"full_attn_idxs[1]", "9"});
}

TEST(BadConfig, UnsupportedVariants) {
  nlohmann::json q = model_config_to_json(preset_config("tiny-qwen3"));
  q["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_config_error(q, ErrorKind::kUnsupported, {"rope_scaling", "yarn"});
  q = model_config_to_json(preset_config("tiny-qwen3"));
  q["attention_bias"] = true;
  expect_config_error(q, ErrorKind::kUnsupported, {"attention_bias"});
  q = model_config_to_json(preset_config("tiny-qwen3"));
  q["use_sliding_window"] = true;
  expect_config_error(q, ErrorKind::kUnsupported, {"use_sliding_window"});
  q = model_config_to_json(preset_config("tiny-qwen3"));
  q["hidden_act"] = "gelu";
  expect_config_error(q, ErrorKind::kUnsupported, {"hidden_act", "gelu"});
}

TEST(BadConfig, TruncatedConfigFilesNeverCrash) {
  std::string text = base_config().dump(1);
  for (size_t cut = 0; cut < text.size(); ++cut) {
    try {
      parse_model_config(text.substr(0, cut), "cut.json");
      ADD_FAILURE() << "a config cut at " << cut << " parsed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.json"), std::string::npos);
    }
  }
}

TEST(BadConfig, ByteFlippedConfigsNeverCrash) {
  // Any flip either still parses to a valid config or gives a stoa::Error naming the file;
  // no other exception type (a leaked json or std exception would be a missed check).
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2moe"}) {
    std::string text = model_config_to_json(preset_config(preset)).dump();
    for (size_t pos = 0; pos < text.size(); ++pos) {
      for (char mask : {'\x01', '\x10', '\x40'}) {
        std::string copy = text;
        copy[pos] = static_cast<char>(copy[pos] ^ mask);
        try {
          ModelConfig c = parse_model_config(copy, "flip.json");
          validate_model_config(c, "flip.json");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("flip.json"), std::string::npos) << e.what();
        }
      }
    }
  }
}

TEST(BadConfig, MissingFile) {
  expect_error([] { load_model_config("/nonexistent/config.json"); }, ErrorKind::kNotFound,
               {"/nonexistent/config.json"});
}

// --- safetensors ----------------------------------------------------------------------------

std::vector<uint8_t> small_file() {
  static Tensor a = Tensor::from_f32({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  static Tensor b(DType::kBF16, {5});
  static Tensor c(DType::kI8, {3});
  return serialize_safetensors({{"a", a.view()}, {"b", b.view()}, {"c", c.view()}},
                               {{"format", "pt"}});
}

std::vector<uint8_t> with_header(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> bytes(8 + header.size() + data_bytes, 0);
  for (int i = 0; i < 8; ++i)
    bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(header.size() >> (8 * i));
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  return bytes;
}

void expect_st_error(const std::vector<uint8_t>& bytes, ErrorKind kind,
                     std::initializer_list<std::string> parts) {
  expect_error([&] { SafetensorsFile::from_bytes(bytes, "w.safetensors"); }, kind, parts);
}

TEST(BadSafetensors, TruncatedAtEveryByte) {
  std::vector<uint8_t> bytes = small_file();
  SafetensorsFile::from_bytes(bytes, "whole");  // the intact file loads
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    std::vector<uint8_t> part(bytes.begin(), bytes.begin() + static_cast<long>(cut));
    expect_error([&] { SafetensorsFile::from_bytes(part, "w.safetensors"); }, ErrorKind::kBadFormat,
                 {"w.safetensors"});
  }
}

TEST(BadSafetensors, TruncatedFilesOnDisk) {
  std::vector<uint8_t> bytes = small_file();
  TempDir dir("trunc");
  for (size_t cut : {size_t{0}, size_t{4}, size_t{8}, size_t{20}, bytes.size() - 1}) {
    std::string path = dir.file(cat("cut", cut, ".safetensors"));
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(cut));
    expect_error([&] { SafetensorsFile::open(path); }, ErrorKind::kBadFormat, {path});
  }
}

TEST(BadSafetensors, ByteFlippedHeadersNeverCrash) {
  std::vector<uint8_t> bytes = small_file();
  size_t header_end = 8;
  for (int i = 0; i < 8; ++i) header_end += size_t{bytes[static_cast<size_t>(i)]} << (8 * i);
  int loaded = 0, rejected = 0;
  for (size_t pos = 0; pos < header_end; ++pos) {
    for (uint8_t mask : {0x01, 0x20, 0x80, 0xff}) {
      std::vector<uint8_t> copy = bytes;
      copy[pos] ^= mask;
      try {
        SafetensorsFile file = SafetensorsFile::from_bytes(copy, "flip.safetensors");
        // A flip that still parses (say, inside a metadata string) must still describe
        // in-bounds, correctly sized tensors.
        for (const SafetensorsEntry& e : file.entries()) {
          ASSERT_LE(e.offset + e.nbytes, copy.size());
          ASSERT_EQ(e.nbytes, static_cast<uint64_t>(shape_numel(e.shape)) * dtype_size(e.dtype));
        }
        ++loaded;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("flip.safetensors"), std::string::npos) << e.what();
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, loaded);
}

TEST(BadSafetensors, MalformedHeaders) {
  expect_st_error(with_header("not json at all", 0), ErrorKind::kBadFormat, {"not valid JSON"});
  expect_st_error(with_header("[1,2,3]", 0), ErrorKind::kBadFormat, {"not a JSON object"});
  expect_st_error(with_header(R"({"a": 3})", 0), ErrorKind::kBadFormat, {"'a'", "not an object"});
  expect_st_error(with_header(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4),
                  ErrorKind::kBadFormat, {"'a'", "dtype"});
  expect_st_error(with_header(R"({"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}})", 4),
                  ErrorKind::kBadFormat, {"'a'", "unknown dtype 'Q9'"});
  expect_st_error(with_header(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8),
                  ErrorKind::kUnsupported, {"'a'", "F64"});
  expect_st_error(with_header(R"({"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", 4),
                  ErrorKind::kBadFormat, {"unknown dtype 'f32'"});
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                  ErrorKind::kBadFormat, {"'a'", "shape"});
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", 4),
                  ErrorKind::kBadFormat, {"'a'", "shape"});
  expect_st_error(
      with_header(
          R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", 4),
      ErrorKind::kBadFormat, {"'a'", "overflows"});
  expect_st_error(
      with_header(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}})", 4),
      ErrorKind::kBadFormat, {"'a'"});
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4),
                  ErrorKind::kBadFormat, {"'a'", "data_offsets"});
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4),
                  ErrorKind::kBadFormat, {"'a'", "reversed"});
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
                  ErrorKind::kBadFormat, {"'a'", "past the data section"});
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4),
                  ErrorKind::kBadFormat, {"'a'", "needs"});
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                              R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                              8),
                  ErrorKind::kBadFormat, {"'a'", "twice"});
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              12),
                  ErrorKind::kBadFormat, {"'b'", "overlaps", "'a'"});
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
                  ErrorKind::kBadFormat, {"unused bytes", "'a'"});
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 6),
                  ErrorKind::kBadFormat, {"2 bytes after the last tensor"});
  expect_st_error(with_header(R"({"__metadata__":{"format":1}})", 0), ErrorKind::kBadFormat,
                  {"__metadata__", "format"});
  expect_st_error(with_header(R"({"__metadata__":[]})", 0), ErrorKind::kBadFormat,
                  {"__metadata__"});
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[[[[[[1]]]]]]}})", 0),
                  ErrorKind::kBadFormat, {"nested"});
  std::string deep(100000, '[');
  expect_st_error(with_header(deep, 0), ErrorKind::kBadFormat, {"w.safetensors"});
  // A header length beyond the file.
  std::vector<uint8_t> bytes = small_file();
  bytes[5] = 0x40;
  expect_st_error(bytes, ErrorKind::kBadFormat, {"header length", "exceeds the file size"});
}

TEST(BadSafetensors, FileErrors) {
  TempDir dir("files");
  expect_error([&] { SafetensorsFile::open(dir.file("none.safetensors")); }, ErrorKind::kNotFound,
               {"none.safetensors"});
  std::ofstream(dir.file("empty.safetensors")).close();
  expect_error([&] { SafetensorsFile::open(dir.file("empty.safetensors")); }, ErrorKind::kBadFormat,
               {"empty.safetensors", "empty"});
  expect_error([&] { SafetensorsFile::open(dir.path()); }, ErrorKind::kBadFormat,
               {"not a regular file"});
}

// --- model directories ----------------------------------------------------------------------

void write_dir(const TempDir& dir, const ModelConfig& config, const std::vector<NamedView>& views) {
  std::ofstream(dir.file("config.json")) << model_config_to_json(config).dump();
  write_safetensors(dir.file("model.safetensors"), views);
}

std::vector<NamedView> views_of(const ModelWeights& w) {
  std::vector<NamedView> out;
  for (const auto& [name, t] : w.tensors) out.emplace_back(name, t.view());
  return out;
}

TEST(BadModelDir, MissingUnexpectedAndMisshapenTensors) {
  ModelConfig c = preset_config("tiny-qwen3");
  ModelWeights w = random_weights(c, 1);
  {
    TempDir dir("missing");
    auto views = views_of(w);
    std::erase_if(views, [](const NamedView& v) { return v.first == "model.norm.weight"; });
    write_dir(dir, c, views);
    expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kBadFormat,
                 {"model.safetensors", "missing", "model.norm.weight"});
  }
  {
    TempDir dir("unexpected");
    auto views = views_of(w);
    Tensor extra(DType::kF32, {4});
    views.emplace_back("model.layers.9.mlp.gate_proj.weight", extra.view());
    write_dir(dir, c, views);
    expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kBadFormat,
                 {"does not have", "model.layers.9.mlp.gate_proj.weight"});
  }
  {
    TempDir dir("shape");
    auto views = views_of(w);
    Tensor wrong(DType::kF32, {96, 64});
    for (auto& v : views) {
      if (v.first == "model.layers.1.self_attn.q_proj.weight") v.second = wrong.view();
    }
    write_dir(dir, c, views);
    expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kBadFormat,
                 {"model.layers.1.self_attn.q_proj.weight", "[96, 64]", "[64, 96]"});
  }
  {
    TempDir dir("dtype");
    auto views = views_of(w);
    Tensor ints(DType::kI32, {96});
    for (auto& v : views) {
      if (v.first == "model.norm.weight") v.second = ints.view();
    }
    write_dir(dir, c, views);
    expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kUnsupported,
                 {"model.norm.weight", "i32"});
  }
}

TEST(BadModelDir, MissingOrBrokenFiles) {
  ModelConfig c = preset_config("tiny-lfm2");
  ModelWeights w = random_weights(c, 1);
  TempDir dir("broken");
  expect_error([&] { load_model_dir(dir.file("nope")); }, ErrorKind::kNotFound, {"nope"});
  expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kNotFound, {"config.json"});
  std::ofstream(dir.file("config.json")) << model_config_to_json(c).dump();
  expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kNotFound, {"model.safetensors"});
  save_model_dir(w, dir.path());
  std::filesystem::resize_file(dir.file("model.safetensors"),
                               std::filesystem::file_size(dir.file("model.safetensors")) - 100);
  expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kBadFormat,
               {"model.safetensors", "past the data section"});
  std::ofstream(dir.file("config.json")) << "{\"model_type\": \"lfm2\", ";
  expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kBadFormat,
               {"config.json", "not valid JSON"});
}

TEST(BadModelDir, BadShardIndex) {
  ModelConfig c = preset_config("tiny-lfm2");
  ModelWeights w = random_weights(c, 1);
  TempDir dir("index");
  save_model_dir(w, dir.path());
  auto write_index = [&](const nlohmann::json& index) {
    std::ofstream(dir.file("model.safetensors.index.json")) << index.dump();
  };
  write_index({{"weight_map", {{"model.embedding_norm.weight", "../../etc/passwd"}}}});
  expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kBadFormat,
               {"index.json", "not a file in the model directory"});
  write_index({{"weight_map", {{"model.nothing.weight", "model.safetensors"}}}});
  expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kBadFormat,
               {"model.nothing.weight", "does not contain it"});
  write_index({{"weight_map", {{"model.embedding_norm.weight", "model.safetensors"}}}});
  expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kBadFormat,
               {"not mapped to this file"});
  write_index({{"weight_map", 3}});
  expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kBadFormat, {"weight_map"});
  std::ofstream(dir.file("model.safetensors.index.json")) << "{";
  expect_error([&] { load_model_dir(dir.path()); }, ErrorKind::kBadFormat, {"not valid JSON"});
}

}  // namespace
}  // namespace stoa
