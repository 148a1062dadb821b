// Bad GGUF input (labels unit;fault, also run under ASan/UBSan): every truncation and every
// single-byte corruption of the header, metadata and tensor table must end in a stoa::Error that
// names the file — or, where the damage still describes a valid model, a clean import. Never a
// crash, an out-of-bounds read, a foreign exception type or an unbounded allocation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"
#include "model/gguf_reader.h"
#include "model/gguf_writer.h"
#include "model/presets.h"
#include "model/weights.h"

namespace stoa {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;
using gguf::Value;

const char* kSource = "fault.gguf";

// A small but complete lfm2moe (conv + attention, dense + MoE layers, per-layer arrays).
std::vector<uint8_t> exported_bytes(GgufExportType type) {
  ModelConfig c = preset_config("tiny-lfm2moe");
  c.vocab_size = 64;
  ModelWeights w = random_weights(c, 11);
  fs::path path = fs::temp_directory_path() / cat("stoa_gguf_fault_", ::getpid(), ".gguf");
  GgufExportOptions opts;
  opts.type = type;
  export_gguf(w, path.string(), opts);
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  fs::remove(path);
  return bytes;
}

// Where tensor data begins (everything before it is structure the parser must validate).
uint64_t data_start(const std::vector<uint8_t>& bytes) {
  return GgufFile::from_bytes(bytes, kSource).data_offset();
}

// Parses and imports; returns "" on success or the stoa::Error message. Any other exception
// type fails the test.
std::string try_import(std::vector<uint8_t> bytes) {
  try {
    GgufFile f = GgufFile::from_bytes(std::move(bytes), kSource);
    import_gguf(f);
    return "";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(kSource), std::string::npos) << "error does not name the file: " << what;
    return what.empty() ? "?" : what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "foreign exception: " << e.what();
    return "foreign";
  }
}

TEST(GgufFault, IntactFileImports) {
  EXPECT_EQ(try_import(exported_bytes(GgufExportType::kQ8_0)), "");
  EXPECT_EQ(try_import(exported_bytes(GgufExportType::kF32)), "");
}

TEST(GgufFault, EveryTruncationIsAnError) {
  std::vector<uint8_t> bytes = exported_bytes(GgufExportType::kQ8_0);
  uint64_t start = data_start(bytes);
  std::vector<size_t> cuts;
  for (size_t n = 0; n < start + 64 && n < bytes.size(); ++n) cuts.push_back(n);
  for (size_t k = 1; k <= 200; ++k) cuts.push_back(start + (bytes.size() - start) * k / 201);
  cuts.push_back(bytes.size() - 1);
  for (size_t n : cuts) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<int64_t>(n));
    std::string err = try_import(cut);
    EXPECT_NE(err, "") << "truncated to " << n << " of " << bytes.size() << " bytes was accepted";
  }
}

// Where the tensor table begins: the first tensor's name, written as a u64 length and its bytes.
uint64_t table_start(const std::vector<uint8_t>& bytes) {
  const std::string name = GgufFile::from_bytes(bytes, kSource).tensors().at(0).name;
  std::vector<uint8_t> needle(8);
  const uint64_t n = name.size();
  std::memcpy(needle.data(), &n, 8);
  needle.insert(needle.end(), name.begin(), name.end());
  auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(it, bytes.end());
  return static_cast<uint64_t>(it - bytes.begin());
}

// Tensor by tensor: the same names, shapes and bytes.
std::string tensor_difference(const ModelWeights& a, const ModelWeights& b) {
  if (a.tensors.size() != b.tensors.size())
    return cat(a.tensors.size(), " tensors vs ", b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    if (!b.has(name)) return cat("no tensor ", name);
    const Tensor& u = b.at(name);
    if (t.shape() != u.shape() || t.nbytes() != u.nbytes() ||
        std::memcmp(t.data(), u.data(), t.nbytes()) != 0)
      return cat("tensor ", name, " differs");
  }
  return "";
}

// Every byte before the tensor data gets one flip. A flip may import only where it cannot change
// what is imported into a different model: then every tensor is identical to the original's,
// the tensor table and the padding after it never change the config either, and only a value in
// the metadata that is not checked against anything (general.name, a norm epsilon, a rope base)
// may change the config. Flips in the tensor table (names, dims, types, offsets) are all refused.
TEST(GgufFault, EveryHeaderByteFlipIsRefusedOrImportsTheSameTensors) {
  // Q8_0 export: the table holds Q8_0 and F32 tensors, so both paths are covered.
  GgufExportType type = GgufExportType::kQ8_0;
  std::vector<uint8_t> bytes = exported_bytes(type);
  const uint64_t start = data_start(bytes), table = table_start(bytes);
  const ModelWeights original = import_gguf(GgufFile::from_bytes(bytes, kSource));
  const std::string original_config = model_config_to_json(original.config).dump();
  size_t errors = 0, same = 0, config_changed = 0, table_accepted = 0;
  for (uint64_t pos = 0; pos < start; ++pos) {
    // One flip per byte keeps this fast under ASan: every other byte is inverted, the rest
    // get a single bit flipped, walking through all eight bit positions.
    uint8_t mask = pos % 2 ? uint8_t{0xff} : static_cast<uint8_t>(1u << (pos / 2 % 8));
    std::vector<uint8_t> bad = bytes;
    bad[pos] ^= mask;
    std::optional<ModelWeights> imported;
    try {
      imported = import_gguf(GgufFile::from_bytes(std::move(bad), kSource));
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(kSource), std::string::npos) << e.what();
      ++errors;
      continue;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "foreign exception at byte " << pos << ": " << e.what();
      continue;
    }
    EXPECT_EQ(tensor_difference(original, *imported), "")
        << "byte " << pos << " ^ " << int{mask} << " imported different tensor data";
    const bool config_same = model_config_to_json(imported->config).dump() == original_config;
    if (pos >= table) {
      ++table_accepted;
      EXPECT_TRUE(config_same) << "byte " << pos << " (tensor table / padding) changed the config";
    }
    (config_same ? same : config_changed) += 1;
  }
  std::printf(
      "[gguf fault] %s: %llu structure bytes (tensor table from %llu), one flip each: %zu errors, "
      "%zu identical imports, %zu imports with another config, %zu accepted in the table\n",
      gguf_export_type_name(type), static_cast<unsigned long long>(start),
      static_cast<unsigned long long>(table), errors, same, config_changed, table_accepted);
  EXPECT_EQ(errors + same + config_changed, start);
  EXPECT_GT(errors, 0u);
}

TEST(GgufFault, DataByteFlipsNeverCrash) {
  std::vector<uint8_t> bytes = exported_bytes(GgufExportType::kQ8_0);
  uint64_t start = data_start(bytes);
  for (size_t k = 0; k < 300; ++k) {
    std::vector<uint8_t> bad = bytes;
    bad[start + (bad.size() - start) * k / 300] ^= 0x7f;
    try_import(std::move(bad));  // a flip to a finite value is undetectable (no checksum)
  }
  // A Q8_0 scale flipped to inf/NaN is caught: 0x7c00 is f16 +inf.
  std::vector<uint8_t> bad = bytes;
  GgufFile f = GgufFile::from_bytes(bytes, kSource);
  const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
  ASSERT_EQ(emb->type, GgmlType::kQ8_0);
  size_t at = static_cast<size_t>(f.data_offset() + emb->offset);
  bad[at] = 0x00;
  bad[at + 1] = 0x7c;
  EXPECT_NE(try_import(bad).find("non-finite"), std::string::npos);
}

TEST(GgufFault, SpecificDamageGetsASpecificMessage) {
  std::vector<uint8_t> bytes = exported_bytes(GgufExportType::kF32);
  auto expect_error = [](std::vector<uint8_t> b, const std::string& needle) {
    std::string err = try_import(std::move(b));
    EXPECT_NE(err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << err;
  };
  std::vector<uint8_t> b = bytes;
  b[0] = 'X';
  expect_error(b, "bad magic");
  b = bytes;
  b[4] = 9;
  expect_error(b, "version 9");
  b = bytes;
  std::memset(b.data() + 16, 0xff, 8);  // metadata count
  expect_error(b, "metadata count");
  expect_error({}, "truncated");

  // Metadata that parses but contradicts the tensors.
  GgufFile good = GgufFile::from_bytes(bytes, kSource);
  GgufWriter w;
  for (const auto& [k, v] : good.metadata()) w.set(k, v);
  w.set("lfm2moe.block_count", Value::u32(3));
  w.set("lfm2moe.attention.head_count_kv", Value::array_i32({0, 2, 0}));
  for (const GgufTensorInfo& t : good.tensors()) {
    auto span = good.tensor_bytes(t);
    w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(span.begin(), span.end()));
  }
  fs::path path = fs::temp_directory_path() / cat("stoa_gguf_fault_meta_", ::getpid(), ".gguf");
  w.write(path.string());
  try {
    import_gguf(path.string());
    ADD_FAILURE() << "a GGUF with a tensor beyond block_count imported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  w.set("general.architecture", Value::string("gpt2"));
  w.write(path.string());
  try {
    import_gguf(path.string());
    ADD_FAILURE() << "a gpt2 GGUF imported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  }
  fs::remove(path);
}

TEST(GgufFault, MissingAndEmptyFiles) {
  try {
    GgufFile::open("/nonexistent/model.gguf");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
  fs::path path = fs::temp_directory_path() / cat("stoa_gguf_empty_", ::getpid(), ".gguf");
  { std::ofstream out(path); }
  try {
    GgufFile::open(path.string());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadFormat);
  }
  fs::remove(path);
}

}  // namespace
}  // namespace stoa
