// `stoa model export-hf`'s writer (see the header for the layout and its rules).
#include "model/hf_export.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arch_registry.h"
#include "model/tokenizer.h"

namespace stoa {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";
// Copied when the tokenizer directory has them; the first two are required.
constexpr const char* kRequiredTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json"};
constexpr const char* kOptionalTokenizerFiles[] = {"chat_template.jinja",
                                                   "special_tokens_map.json"};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  STOA_CHECK(in, ErrorKind::kIo, path.string(), ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json read_json_object(const fs::path& path) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadFormat, path.string(), ": not valid JSON: ", e.what());
  }
  STOA_CHECK(value.is_object(), ErrorKind::kBadFormat, path.string(), ": not a JSON object");
  return value;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  STOA_CHECK(out.good(), ErrorKind::kIo, path.string(), ": write failed (disk full?)");
}

void check_out_dir(const std::string& out) {
  STOA_CHECK(!out.empty(), ErrorKind::kInvalidArgument, "export-hf: --out DIR is required");
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  STOA_CHECK(fs::is_directory(out, ec), ErrorKind::kInvalidArgument, "export-hf: ", out,
             " exists and is not a directory");
  STOA_CHECK(fs::is_empty(out, ec), ErrorKind::kInvalidArgument, "export-hf: ", out,
             " exists and is not empty; an export never writes over files (choose a new "
             "directory)");
}

// The tokenizer must be there and must fit the model: ids past the embedding would crash any
// loader at the first prompt that uses them. Returns where the chat template lives.
std::string check_tokenizer(const fs::path& dir, const ModelConfig& config) {
  STOA_CHECK(!dir.empty(), ErrorKind::kInvalidArgument,
             "export-hf: no tokenizer directory (give --tokenizer-from DIR)");
  for (const char* name : kRequiredTokenizerFiles) {
    STOA_CHECK(fs::is_regular_file(dir / name), ErrorKind::kNotFound,
               "export-hf: ", (dir / name).string(),
               " is missing; an exported model needs its tokenizer (tokenizer.json and "
               "tokenizer_config.json; give --tokenizer-from DIR)");
  }
  const int64_t vocab = Tokenizer::from_file((dir / "tokenizer.json").string()).vocab_size();
  STOA_CHECK(vocab <= config.vocab_size, ErrorKind::kBadFormat,
             "export-hf: ", (dir / "tokenizer.json").string(), " has ids up to ", vocab - 1,
             " but the model's ", "vocabulary is ", config.vocab_size,
             " (the tokenizer of another model?)");
  const nlohmann::json tok_config = read_json_object(dir / "tokenizer_config.json");
  std::string where;
  if (tok_config.contains("chat_template") && !tok_config["chat_template"].is_null())
    where = "tokenizer_config.json";
  if (fs::is_regular_file(dir / "chat_template.jinja"))
    where += (where.empty() ? "" : " + ") + std::string("chat_template.jinja");
  return where;
}

struct Planned {
  SafetensorsPlanned tensor;
  uint64_t bytes = 0;
  size_t shard = 0;
};

std::vector<Planned> plan_tensors(const TensorSource& source, DType dtype, uint64_t shard_bytes) {
  std::vector<Planned> planned;
  std::vector<uint64_t> bytes;
  for (const TensorSpec& spec : source.specs()) {
    // The routing bias stays f32 whatever the dtype (docs/design/model.md).
    const DType d = keeps_f32(source.config(), spec.name) ? DType::kF32 : dtype;
    Planned p{{spec.name, d, spec.shape},
              static_cast<uint64_t>(shape_numel(spec.shape)) * dtype_size(d),
              0};
    bytes.push_back(p.bytes);
    planned.push_back(std::move(p));
  }
  std::vector<size_t> shards = plan_hf_shards(bytes, shard_bytes);
  for (size_t k = 0; k < planned.size(); ++k) planned[k].shard = shards[k];
  return planned;
}

// One tensor of the source in the file's dtype; refuses NaN/inf (a broken policy must not leave
// as a loadable model).
Tensor produce(const TensorSource& source, const SafetensorsPlanned& p) {
  Tensor f32 = source.f32(source.spec(p.name));
  const float* values = f32.as<float>();
  const int64_t n = f32.numel();
  for (int64_t k = 0; k < n; ++k) {
    if (!std::isfinite(values[k])) {
      fail(ErrorKind::kBadFormat, source.description(), ": tensor '", p.name, "' holds ", values[k],
           " at element ", k, "; refusing to export a non-finite weight");
    }
  }
  if (p.dtype == DType::kF32) return f32;
  return convert_float(f32.view(), p.dtype);
}

void write_weights(const TensorSource& source, const std::vector<Planned>& planned,
                   const fs::path& dir, HfExportResult* result) {
  const size_t shards = planned.empty() ? 1 : planned.back().shard + 1;
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};  // transformers wants it
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t s = 0; s < shards; ++s) {
    std::vector<SafetensorsPlanned> in_shard;
    for (const Planned& p : planned)
      if (p.shard == s) in_shard.push_back(p.tensor);
    const std::string name = shards == 1 ? kSingleName : hf_shard_name(s, shards);
    write_safetensors_streamed((dir / name).string(), in_shard, metadata,
                               [&](const SafetensorsPlanned& p) { return produce(source, p); });
    for (const SafetensorsPlanned& p : in_shard) weight_map[p.name] = name;
  }
  result->tensors = planned.size();
  result->shards = shards;
  result->tensor_bytes = 0;
  for (const Planned& p : planned) result->tensor_bytes += p.bytes;
  if (shards > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", result->tensor_bytes}}},
                            {"weight_map", weight_map}};
    write_text(dir / kIndexName, index.dump(2) + "\n");
  }
}

void write_companion_files(const ModelConfig& config, DType dtype, const HfExportOptions& options,
                           const fs::path& dir) {
  nlohmann::json config_json = model_config_to_json(config);
  config_json["torch_dtype"] = dtype == DType::kBF16 ? "bfloat16" : "float32";
  write_text(dir / "config.json", config_json.dump(2) + "\n");

  const fs::path tok_dir(options.tokenizer_dir);
  std::error_code ec;
  for (const char* name : kRequiredTokenizerFiles) {
    fs::copy_file(tok_dir / name, dir / name, ec);
    STOA_CHECK(!ec, ErrorKind::kIo, "export-hf: cannot copy ", (tok_dir / name).string(), ": ",
               ec.message());
  }
  for (const char* name : kOptionalTokenizerFiles) {
    if (!fs::is_regular_file(tok_dir / name)) continue;
    fs::copy_file(tok_dir / name, dir / name, ec);
    STOA_CHECK(!ec, ErrorKind::kIo, "export-hf: cannot copy ", (tok_dir / name).string(), ": ",
               ec.message());
  }
  std::optional<nlohmann::json> base;
  if (fs::is_regular_file(tok_dir / "generation_config.json"))
    base = read_json_object(tok_dir / "generation_config.json");
  nlohmann::json generation =
      hf_generation_config(config, base ? &*base : nullptr, options.sampling);
  write_text(dir / "generation_config.json", generation.dump(2) + "\n");
}

}  // namespace

std::vector<size_t> plan_hf_shards(const std::vector<uint64_t>& bytes, uint64_t max_bytes) {
  std::vector<size_t> shard(bytes.size());
  size_t current = 0;
  uint64_t filled = 0;
  bool empty = true;
  for (size_t k = 0; k < bytes.size(); ++k) {
    if (max_bytes != 0 && !empty && filled + bytes[k] > max_bytes) {
      ++current;
      filled = 0;
      empty = true;
    }
    shard[k] = current;
    filled += bytes[k];
    empty = false;
  }
  return shard;
}

std::string hf_shard_name(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

HfExportResult export_hf(const TensorSource& source, const std::string& out,
                         const HfExportOptions& options) {
  STOA_CHECK(options.dtype == DType::kBF16 || options.dtype == DType::kF32,
             ErrorKind::kInvalidArgument, "export-hf: dtype must be bf16 or f32, not ",
             dtype_name(options.dtype));
  check_out_dir(out);
  const ModelConfig& config = source.config();
  validate_model_config(config, source.description());
  HfExportResult result;
  result.chat_template = check_tokenizer(options.tokenizer_dir, config);
  const std::vector<Planned> planned = plan_tensors(source, options.dtype, options.shard_bytes);

  // Built beside `out`, then renamed: `out` is either absent/empty or a complete export.
  fs::path final_dir = fs::absolute(out).lexically_normal();
  if (final_dir.filename().empty()) final_dir = final_dir.parent_path();  // "out/" names out
  const fs::path staging = final_dir.string() + cat(".partial-", ::getpid());
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "export-hf: cannot create ", staging.string(), ": ",
             ec.message());
  try {
    write_weights(source, planned, staging, &result);
    write_companion_files(config, options.dtype, options, staging);
    if (fs::exists(final_dir)) fs::remove(final_dir, ec);  // empty (checked above)
    if (!ec) fs::rename(staging, final_dir, ec);
    STOA_CHECK(!ec, ErrorKind::kIo, "export-hf: cannot move ", staging.string(), " to ",
               final_dir.string(), ": ", ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    throw;
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(final_dir))
    result.files.push_back(entry.path().filename().string());
  std::sort(result.files.begin(), result.files.end());
  return result;
}

}  // namespace stoa
