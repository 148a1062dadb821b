// Bad input to the streaming conversions (model_dir.cpp, gguf_source.cpp, the streamed writers):
// a truncated or corrupt safetensors or GGUF fails with an error naming the file, the tensor and
// the byte offset, and a conversion that fails half-way leaves nothing under the output name
// (nor a temporary file) — an earlier good file there stays as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/gguf_source.h"
#include "model/gguf_writer.h"
#include "model/presets.h"
#include "model/tensor_source.h"
#include "model/weights.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace stoa {
namespace {

namespace fs = std::filesystem;

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The names in `dir` (temporary files included).
std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(StreamFault, TruncatedSafetensorsNamesFileTensorAndOffset) {
  testing::TempDir dir("stream-fault");
  RandomTensorSource source(preset_config("tiny-qwen3"), 1);
  save_model_dir(source, dir.file("m"), DType::kBF16);
  std::string file = dir.file("m/model.safetensors");
  std::vector<char> bytes = read_all(file);
  bytes.resize(bytes.size() - 1000);  // cut inside the last tensors' data
  write_all(file, bytes);
  std::string message = test::message_of([&] { ModelDirTensorSource s(dir.file("m")); });
  EXPECT_NE(message.find(file), std::string::npos) << message;
  EXPECT_NE(message.find("tensor '"), std::string::npos) << message;
  EXPECT_NE(message.find("file bytes"), std::string::npos) << message;
  // Exporting it fails before anything is written.
  message = test::message_of(
      [&] { export_gguf(ModelDirTensorSource(dir.file("m")), dir.file("o.gguf")); });
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"m"});
}

// A Q8_0 GGUF of tiny-lfm2moe (stacked experts), its bytes, and one tensor's place in them.
struct Gguf {
  std::vector<char> bytes;
  GgufTensorInfo last;      // the last tensor of the file
  GgufTensorInfo last_f32;  // the last F32 one (a norm or the expert bias)
  uint64_t data_offset = 0;
};

Gguf make_gguf(const std::string& path) {
  GgufExportOptions eo;
  eo.type = GgufExportType::kQ8_0;
  export_gguf(RandomTensorSource(preset_config("tiny-lfm2moe"), 4), path, eo);
  GgufFile f = GgufFile::open(path);
  Gguf g;
  g.bytes = read_all(path);
  g.last = f.tensors().back();
  for (const GgufTensorInfo& t : f.tensors())
    if (t.type == gguf::GgmlType::kF32) g.last_f32 = t;
  g.data_offset = f.data_offset();
  return g;
}

TEST(StreamFault, TruncatedGgufNamesFileTensorAndOffset) {
  testing::TempDir dir("stream-fault");
  std::string path = dir.file("m.gguf");
  Gguf g = make_gguf(path);
  g.bytes.resize(g.data_offset + g.last.offset + g.last.nbytes / 2);
  write_all(path, g.bytes);
  std::string message = test::message_of([&] { GgufTensorSource s(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("'" + g.last.name + "'"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(g.last.offset)), std::string::npos) << message;
}

TEST(StreamFault, CorruptTensorMidWayLeavesNoOutput) {
  testing::TempDir dir("stream-fault");
  std::string path = dir.file("m.gguf");
  Gguf g = make_gguf(path);
  // A NaN in a late f32 tensor: found only when the writers reach it.
  const GgufTensorInfo& bad = g.last_f32;
  ASSERT_FALSE(bad.name.empty());
  float nan = std::nanf("");
  std::memcpy(g.bytes.data() + g.data_offset + bad.offset, &nan, 4);
  write_all(path, g.bytes);
  GgufTensorSource source(path);  // the structure is intact
  // An earlier good output stays untouched; no temporary file is left.
  write_all(dir.file("out.gguf"), {'o', 'l', 'd'});
  GgufExportOptions eo;
  eo.type = GgufExportType::kF16;
  std::string message = test::message_of([&] { export_gguf(source, dir.file("out.gguf"), eo); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("'" + bad.name + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("file offset " + std::to_string(g.data_offset + bad.offset)),
            std::string::npos)
      << message;
  EXPECT_EQ(read_all(dir.file("out.gguf")), (std::vector<char>{'o', 'l', 'd'}));
  message = test::message_of([&] { save_model_dir(source, dir.file("dir"), DType::kBF16); });
  EXPECT_NE(message.find("non-finite"), std::string::npos) << message;
  EXPECT_EQ(listing(dir.path()), (std::vector<std::string>{"dir", "m.gguf", "out.gguf"}));
  EXPECT_TRUE(listing(dir.file("dir")).empty());
}

TEST(StreamFault, StreamedEqualsInMemory) {
  // The streamed writers and random init give the bytes the in-memory path gives.
  testing::TempDir dir("stream-fault");
  for (const char* preset : {"tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"}) {
    ModelConfig c = preset_config(preset);
    ModelWeights w = random_weights(c, 6);
    save_model_dir(w, dir.file("a"), DType::kBF16);
    save_model_dir(RandomTensorSource(c, 6), dir.file("b"), DType::kBF16);
    EXPECT_EQ(read_all(dir.file("a/model.safetensors")), read_all(dir.file("b/model.safetensors")))
        << preset;
    GgufExportOptions eo;
    eo.type = GgufExportType::kQ8_0;
    export_gguf(w, dir.file("a.gguf"), eo);
    export_gguf(RandomTensorSource(c, 6), dir.file("b.gguf"), eo);
    EXPECT_EQ(read_all(dir.file("a.gguf")), read_all(dir.file("b.gguf"))) << preset;
    // Q8_0 -> Q8_0 passes the blocks through.
    export_gguf(GgufTensorSource(dir.file("a.gguf")), dir.file("c.gguf"), eo);
    EXPECT_EQ(read_all(dir.file("a.gguf")), read_all(dir.file("c.gguf"))) << preset;
  }
}

}  // namespace
}  // namespace stoa
