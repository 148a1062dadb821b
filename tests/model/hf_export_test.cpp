// model/hf_export: the Hugging Face export read back by our own importer. bf16 is every tensor's
// round-to-nearest-even rounding bit for bit (torch's .to(torch.bfloat16)), f32 the identity,
// shards the same weights; tokenizer, chat template and generation config are there and parse;
// bad requests are refused and leave nothing behind.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "model/arch_registry.h"
#include "model/hf_export.h"
#include "model/hf_export_fixture.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"
#include "support/file_text.h"
#include "support/param_names.h"
#include "support/temp_dir.h"

namespace stoa {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& path) {
  return nlohmann::json::parse(testing::read_text(path));
}

uint32_t bits(float value) {
  return std::bit_cast<uint32_t>(value);
}

ModelWeights source_weights(const std::string& preset, uint64_t seed) {
  return random_weights(test::with_token_ids(preset_config(preset)), seed);
}

HfExportOptions options_for(const fs::path& tokenizer_dir, DType dtype) {
  HfExportOptions options;
  options.dtype = dtype;
  options.tokenizer_dir = tokenizer_dir.string();
  return options;
}

void expect_error(ErrorKind kind, const std::string& needle, const std::function<void()>& body) {
  try {
    body();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

class HfExportPreset : public ::testing::TestWithParam<std::string> {};

TEST_P(HfExportPreset, Bf16IsTheNearestEvenRoundingOfEveryTensorBitForBit) {
  testing::TempDir tmp("hf-export");
  const ModelWeights original = source_weights(GetParam(), 11);
  const fs::path src = tmp.file("src"), out = tmp.file("out");
  test::write_source_model(original, src);

  ModelDirTensorSource source(src.string());
  const HfExportResult result = export_hf(source, out.string(), options_for(src, DType::kBF16));
  EXPECT_EQ(result.shards, 1u);
  EXPECT_EQ(result.tensors, original.tensors.size());
  EXPECT_FALSE(fs::exists(out / "model.safetensors.index.json"));

  // The file holds bf16 (the routing bias f32) under the published names, and config.json says so.
  const SafetensorsFile file = SafetensorsFile::open((out / "model.safetensors").string());
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.entries().size(), original.tensors.size());
  for (const TensorSpec& spec : expected_tensors(original.config)) {
    const SafetensorsEntry* entry = file.find(spec.name);
    ASSERT_NE(entry, nullptr) << spec.name;
    EXPECT_EQ(entry->dtype, keeps_f32(original.config, spec.name) ? DType::kF32 : DType::kBF16)
        << spec.name;
  }
  const nlohmann::json config = read_json(out / "config.json");
  EXPECT_EQ(config.at("torch_dtype"), "bfloat16");
  EXPECT_EQ(parse_model_config(config.dump(), "config.json").num_layers,
            original.config.num_layers);

  // Re-imported by our importer: each value is the bf16 rounding of the original.
  const ModelWeights back = load_model_dir(out.string());
  EXPECT_EQ(model_config_to_json(back.config), model_config_to_json(original.config));
  int64_t rounded_away = 0;
  for (const auto& [name, tensor] : original.tensors) {
    const Tensor& got = back.at(name);
    ASSERT_EQ(got.shape(), tensor.shape()) << name;
    const float* a = tensor.as<float>();
    const float* b = got.as<float>();
    const bool f32 = keeps_f32(original.config, name);
    for (int64_t k = 0; k < tensor.numel(); ++k) {
      const float expected = f32 ? a[k] : bf16_to_f32(f32_to_bf16(a[k]));
      ASSERT_EQ(bits(b[k]), bits(expected)) << name << "[" << k << "]";
      rounded_away += bits(b[k]) != bits(a[k]);
    }
  }
  EXPECT_GT(rounded_away, 0) << "random f32 weights all bf16-exact: the test proves nothing";
}

TEST_P(HfExportPreset, F32IsTheIdentity) {
  testing::TempDir tmp("hf-export");
  const ModelWeights original = source_weights(GetParam(), 12);
  const fs::path src = tmp.file("src"), out = tmp.file("out");
  test::write_source_model(original, src);
  export_hf(ModelDirTensorSource(src.string()), out.string(), options_for(src, DType::kF32));
  EXPECT_EQ(read_json(out / "config.json").at("torch_dtype"), "float32");
  const ModelWeights back = load_model_dir(out.string());
  for (const auto& [name, tensor] : original.tensors) {
    ASSERT_EQ(back.at(name).nbytes(), tensor.nbytes()) << name;
    EXPECT_EQ(std::memcmp(back.at(name).data(), tensor.data(), tensor.nbytes()), 0) << name;
  }
}

TEST_P(HfExportPreset, ShardedExportIsHfsLayoutAndReadsBackTheSame) {
  testing::TempDir tmp("hf-export");
  const ModelWeights original = source_weights(GetParam(), 13);
  const fs::path src = tmp.file("src"), one = tmp.file("one"), sharded = tmp.file("sharded");
  test::write_source_model(original, src);
  ModelDirTensorSource source(src.string());
  const HfExportResult single = export_hf(source, one.string(), options_for(src, DType::kBF16));

  HfExportOptions options = options_for(src, DType::kBF16);
  options.shard_bytes = single.tensor_bytes / 4;  // about four shards
  const HfExportResult result = export_hf(source, sharded.string(), options);
  ASSERT_GE(result.shards, 4u);
  EXPECT_EQ(result.tensor_bytes, single.tensor_bytes);
  EXPECT_FALSE(fs::exists(sharded / "model.safetensors"));

  const nlohmann::json index = read_json(sharded / "model.safetensors.index.json");
  EXPECT_EQ(index.at("metadata").at("total_size").get<uint64_t>(), result.tensor_bytes);
  const nlohmann::json& map = index.at("weight_map");
  EXPECT_EQ(map.size(), original.tensors.size());
  std::map<std::string, uint64_t> shard_bytes;
  for (const TensorSpec& spec : expected_tensors(original.config)) {
    ASSERT_TRUE(map.contains(spec.name)) << spec.name;
    const std::string file = map.at(spec.name).get<std::string>();
    const SafetensorsFile shard = SafetensorsFile::open((sharded / file).string());
    ASSERT_NE(shard.find(spec.name), nullptr) << spec.name << " in " << file;
    shard_bytes[file] += shard.find(spec.name)->nbytes;
  }
  ASSERT_EQ(shard_bytes.size(), result.shards);
  for (size_t s = 0; s < result.shards; ++s)
    EXPECT_TRUE(shard_bytes.count(hf_shard_name(s, result.shards))) << s;
  for (const auto& [file, bytes] : shard_bytes) {
    // Over the limit only when one tensor alone is larger (the embedding).
    const SafetensorsFile shard = SafetensorsFile::open((sharded / file).string());
    EXPECT_TRUE(bytes <= options.shard_bytes || shard.entries().size() == 1) << file;
  }

  const ModelWeights a = load_model_dir(one.string());
  const ModelWeights b = load_model_dir(sharded.string());
  for (const auto& [name, tensor] : a.tensors)
    EXPECT_EQ(std::memcmp(b.at(name).data(), tensor.data(), tensor.nbytes()), 0) << name;
}

INSTANTIATE_TEST_SUITE_P(Tiny, HfExportPreset,
                         ::testing::Values("tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"),
                         stoa::test::PresetParamName());

// torch rounds f32 -> bf16 to nearest, ties to even, with no flush of denormals: bit patterns
// at and around the halfway point, read raw from the file.
TEST(HfExport, RoundsHalfwayCasesToEvenAsTorchDoes) {
  testing::TempDir tmp("hf-export");
  ModelWeights weights = source_weights("tiny-qwen3", 14);
  const struct {
    uint32_t in;
    uint16_t out;
  } cases[] = {
      {0x3F808000u, 0x3F80},  // 1.00390625: halfway, the even neighbour is below
      {0x3F818000u, 0x3F82},  // halfway, the even neighbour is above
      {0x3F808001u, 0x3F81},  // just past halfway: up
      {0x3F807FFFu, 0x3F80},  // just short of halfway: down
      {0xBF818000u, 0xBF82},  // negative halfway: to even, away from zero here
      {0x3FFFFFFFu, 0x4000},  // rounds up into the next exponent
      {0x00018000u, 0x0002},  // a denormal, halfway: kept, not flushed, to even
      {0x00000001u, 0x0000},  // the smallest denormal: to +0
      {0x80000000u, 0x8000},  // -0 stays -0
  };
  float* embed = weights.tensors.at("model.embed_tokens.weight").as<float>();
  for (size_t k = 0; k < std::size(cases); ++k) embed[k] = std::bit_cast<float>(cases[k].in);
  const fs::path tok = tmp.file("tok"), out = tmp.file("out");
  test::write_tokenizer_files(tok);
  export_hf(WeightsTensorSource(weights), out.string(), options_for(tok, DType::kBF16));
  const SafetensorsFile file = SafetensorsFile::open((out / "model.safetensors").string());
  const Tensor stored = file.load("model.embed_tokens.weight");
  ASSERT_EQ(stored.dtype(), DType::kBF16);
  const uint16_t* raw = static_cast<const uint16_t*>(stored.data());
  for (size_t k = 0; k < std::size(cases); ++k)
    EXPECT_EQ(raw[k], cases[k].out) << std::hex << "f32 0x" << cases[k].in;
}

TEST(HfExport, CopiesTheTokenizerAndChatTemplateAndWritesTheGenerationConfig) {
  testing::TempDir tmp("hf-export");
  const ModelWeights original = source_weights("tiny-lfm2", 15);
  const fs::path src = tmp.file("src"), out = tmp.file("out"), greedy = tmp.file("greedy");
  test::write_source_model(original, src);
  HfExportOptions options = options_for(src, DType::kBF16);
  options.sampling = HfSampling{0.7, 0.9, 0};
  const HfExportResult result =
      export_hf(ModelDirTensorSource(src.string()), out.string(), options);
  EXPECT_EQ(result.chat_template, "tokenizer_config.json + chat_template.jinja");
  const std::vector<std::string> expected_files = {
      "chat_template.jinja",     "config.json",    "generation_config.json", "model.safetensors",
      "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"};
  EXPECT_EQ(result.files, expected_files);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                           "special_tokens_map.json"})
    EXPECT_EQ(testing::read_text(out / name), testing::read_text(src / name)) << name;
  // They parse: the tokenizer loads, the template is the one given.
  EXPECT_EQ(Tokenizer::from_file((out / "tokenizer.json").string()).vocab_size(), 261);
  EXPECT_EQ(read_json(out / "tokenizer_config.json").at("chat_template"), test::kChatTemplate);

  // The publisher's eos list stays; bos/pad come from config.json; the run's sampling replaces
  // the publisher's, written out in full (top_k 0, not HF's default 50); the penalty the run
  // never applied is gone.
  const nlohmann::json gen = read_json(out / "generation_config.json");
  EXPECT_EQ(gen.at("eos_token_id"), nlohmann::json({260, 258}));
  EXPECT_EQ(gen.at("bos_token_id"), 259);
  EXPECT_EQ(gen.at("pad_token_id"), 258);
  EXPECT_EQ(gen.at("do_sample"), true);
  EXPECT_DOUBLE_EQ(gen.at("temperature").get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(gen.at("top_p").get<double>(), 0.9);
  EXPECT_EQ(gen.at("top_k"), 0);
  EXPECT_FALSE(gen.contains("repetition_penalty"));
  EXPECT_EQ(gen.at("transformers_version"), "4.51.0");

  // Temperature 0 (greedy): do_sample false and no sampling keys, as HF validates it.
  options.sampling = HfSampling{0.0, 1.0, 0};
  export_hf(ModelDirTensorSource(src.string()), greedy.string(), options);
  const nlohmann::json g = read_json(greedy / "generation_config.json");
  EXPECT_EQ(g.at("do_sample"), false);
  EXPECT_FALSE(g.contains("temperature") || g.contains("top_p") || g.contains("top_k"));
}

TEST(HfExport, WithoutAGenerationConfigTheIdsComeFromConfigJson) {
  testing::TempDir tmp("hf-export");
  const ModelWeights original = source_weights("tiny-qwen3", 16);
  const fs::path src = tmp.file("src"), out = tmp.file("out");
  test::write_source_model(original, src);
  fs::remove(src / "generation_config.json");
  fs::remove(src / "chat_template.jinja");
  fs::remove(src / "special_tokens_map.json");
  const HfExportResult result =
      export_hf(ModelDirTensorSource(src.string()), out.string(), options_for(src, DType::kBF16));
  EXPECT_EQ(result.chat_template, "tokenizer_config.json");
  EXPECT_FALSE(fs::exists(out / "chat_template.jinja"));
  EXPECT_FALSE(fs::exists(out / "special_tokens_map.json"));
  EXPECT_EQ(read_json(out / "generation_config.json"),
            nlohmann::json({{"bos_token_id", 259}, {"eos_token_id", 260}, {"pad_token_id", 258}}));
}

TEST(HfExport, PlansShardsGreedilyAsHfDoes) {
  EXPECT_EQ(plan_hf_shards({4, 4, 4}, 8), (std::vector<size_t>{0, 0, 1}));
  EXPECT_EQ(plan_hf_shards({4, 4, 4}, 12), (std::vector<size_t>{0, 0, 0}));
  EXPECT_EQ(plan_hf_shards({1, 10, 1}, 8), (std::vector<size_t>{0, 1, 2}));  // oversize alone
  EXPECT_EQ(plan_hf_shards({10, 1}, 8), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(plan_hf_shards({4, 4, 4}, 0), (std::vector<size_t>{0, 0, 0}));  // 0: one file
  EXPECT_EQ(hf_shard_name(1, 3), "model-00002-of-00003.safetensors");
}

class HfExportRefuses : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_source_model(source_weights("tiny-qwen3", 17), src);
    source = std::make_unique<ModelDirTensorSource>(src.string());
  }
  // Nothing was written: `out` as it was, no staging directory beside it.
  void expect_nothing_left(const fs::path& out) {
    for (const fs::directory_entry& e : fs::directory_iterator(tmp.path()))
      EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos) << e.path();
    EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  }
  testing::TempDir tmp{"hf-export"};
  fs::path src = tmp.file("src");
  std::unique_ptr<ModelDirTensorSource> source;
};

TEST_F(HfExportRefuses, ANonEmptyOutDirectoryAndLeavesItAlone) {
  const fs::path out = tmp.file("out");
  fs::create_directories(out);
  test::write_file(out / "notes.txt", "mine");
  expect_error(ErrorKind::kInvalidArgument, "not empty",
               [&] { export_hf(*source, out.string(), options_for(src, DType::kBF16)); });
  EXPECT_EQ(testing::read_text(out / "notes.txt"), "mine");
  expect_nothing_left(out);
  test::write_file(tmp.file("a_file"), "x");
  expect_error(ErrorKind::kInvalidArgument, "not a directory",
               [&] { export_hf(*source, tmp.file("a_file"), options_for(src, DType::kBF16)); });
  // An empty directory is taken (named with a trailing slash: the staging directory is still
  // built beside it, not inside).
  const fs::path empty = tmp.file("empty");
  fs::create_directories(empty);
  export_hf(*source, empty.string() + "/", options_for(src, DType::kBF16));
  EXPECT_TRUE(fs::exists(empty / "model.safetensors"));
  expect_nothing_left(tmp.file("no-such"));
}

TEST_F(HfExportRefuses, AnUnknownDtype) {
  expect_error(ErrorKind::kInvalidArgument, "bf16 or f32",
               [&] { export_hf(*source, tmp.file("out"), options_for(src, DType::kF16)); });
  expect_nothing_left(tmp.file("out"));
}

TEST_F(HfExportRefuses, AMissingTokenizer) {
  const fs::path tok = tmp.file("tok");
  test::write_tokenizer_files(tok);
  fs::remove(tok / "tokenizer.json");
  expect_error(ErrorKind::kNotFound, "tokenizer.json is missing",
               [&] { export_hf(*source, tmp.file("out"), options_for(tok, DType::kBF16)); });
  test::write_tokenizer_files(tok);
  fs::remove(tok / "tokenizer_config.json");
  expect_error(ErrorKind::kNotFound, "tokenizer_config.json is missing",
               [&] { export_hf(*source, tmp.file("out"), options_for(tok, DType::kBF16)); });
  expect_error(ErrorKind::kInvalidArgument, "--tokenizer-from",
               [&] { export_hf(*source, tmp.file("out"), options_for("", DType::kBF16)); });
  expect_nothing_left(tmp.file("out"));
}

TEST_F(HfExportRefuses, ATokenizerLargerThanTheVocabulary) {
  ModelConfig small = preset_config("tiny-qwen3");
  small.vocab_size = 200;  // the tokenizer's ids reach 260
  const fs::path model = tmp.file("small");
  save_model_dir(random_weights(small, 1), model.string(), DType::kF32);
  expect_error(ErrorKind::kBadFormat, "another model", [&] {
    export_hf(ModelDirTensorSource(model.string()), tmp.file("out"),
              options_for(src, DType::kBF16));
  });
  expect_nothing_left(tmp.file("out"));
}

TEST_F(HfExportRefuses, ANonFiniteWeightNamingTheTensor) {
  ModelWeights weights = source_weights("tiny-qwen3", 18);
  weights.tensors.at("model.layers.1.mlp.up_proj.weight").as<float>()[7] =
      std::numeric_limits<float>::quiet_NaN();
  expect_error(
      ErrorKind::kBadFormat, "model.layers.1.mlp.up_proj.weight' holds nan at element 7", [&] {
        export_hf(WeightsTensorSource(weights), tmp.file("out"), options_for(src, DType::kBF16));
      });
  EXPECT_FALSE(fs::exists(tmp.file("out")));
  expect_nothing_left(tmp.file("out"));
}

}  // namespace
}  // namespace stoa
