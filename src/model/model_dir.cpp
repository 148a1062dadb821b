// Hugging Face model directories: config.json + model.safetensors (or shards with an index), or
// an int8-sized one with model.gguf (Q8_0). Loading checks the tensors against the config's
// expected list (ModelDirTensorSource), so a checkpoint of another size or architecture fails
// here with the tensor named, not later as a wrong answer. Saving streams tensor by tensor.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arch_registry.h"
#include "model/gguf_reader.h"
#include "model/safetensors.h"
#include "model/tensor_source.h"
#include "model/weights.h"

namespace stoa {

namespace {

void write_text_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      fail(ErrorKind::kIo, path, ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail(ErrorKind::kIo, path, ": rename failed: ", ec.message());
}

}  // namespace

ModelWeights load_model_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  // An int8-sized directory (stoa model init --dtype q8_0) holds its weights as a Q8_0 GGUF.
  if (fs::is_directory(dir) && !fs::exists(fs::path(dir) / "model.safetensors") &&
      !fs::exists(fs::path(dir) / "model.safetensors.index.json") &&
      fs::exists(fs::path(dir) / kModelGgufName)) {
    return import_gguf((fs::path(dir) / kModelGgufName).string());
  }
  ModelDirTensorSource source(dir);
  ModelWeights weights;
  weights.config = source.config();
  for (const TensorSpec& spec : source.specs())
    weights.tensors.emplace(spec.name, source.f32(spec));
  return weights;
}

void save_model_dir(const TensorSource& source, const std::string& dir, DType dtype,
                    const TensorObserver& observe) {
  namespace fs = std::filesystem;
  STOA_CHECK(dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
             ErrorKind::kInvalidArgument, "save_model_dir: dtype must be f32, bf16 or f16, not ",
             dtype_name(dtype));
  const ModelConfig& config = source.config();
  validate_model_config(config, cat(dir, "/config.json (being written)"));
  std::vector<SafetensorsPlanned> planned;
  for (const TensorSpec& spec : source.specs()) {
    // The routing bias stays f32 whatever the dtype: bf16 would flip expert choices between
    // trainer and worker.
    planned.push_back({spec.name, keeps_f32(config, spec.name) ? DType::kF32 : dtype, spec.shape});
  }

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(ErrorKind::kIo, dir, ": cannot create directory: ", ec.message());
  // A stale index would make loaders read old shards instead of the new file; a stale GGUF
  // would be read if this write failed half-way.
  fs::remove(fs::path(dir) / "model.safetensors.index.json", ec);
  fs::remove(fs::path(dir) / kModelGgufName, ec);
  // transformers refuses safetensors files whose metadata lacks format "pt".
  write_safetensors_streamed((fs::path(dir) / "model.safetensors").string(), planned,
                             {{"format", "pt"}}, [&](const SafetensorsPlanned& p) {
                               const TensorSpec& spec = source.spec(p.name);
                               Tensor f32 = source.f32(spec);
                               if (observe) observe(spec, f32);
                               if (p.dtype == DType::kF32) return f32;
                               return convert_float(f32.view(), p.dtype);
                             });
  nlohmann::json config_json = model_config_to_json(config);
  config_json["torch_dtype"] = dtype == DType::kF32    ? "float32"
                               : dtype == DType::kBF16 ? "bfloat16"
                                                       : "float16";
  write_text_atomically((fs::path(dir) / "config.json").string(), config_json.dump(2) + "\n");
}

void save_model_dir(const ModelWeights& weights, const std::string& dir, DType dtype) {
  const ModelConfig& config = weights.config;
  std::vector<TensorSpec> specs = expected_tensors(config);
  for (const TensorSpec& spec : specs) {
    const Tensor& t = weights.at(spec.name);
    STOA_CHECK(t.shape() == spec.shape, ErrorKind::kInvalidArgument, "save_model_dir: tensor '",
               spec.name, "' has shape ", shape_string(t.shape()), ", the config implies ",
               shape_string(spec.shape));
  }
  if (weights.tensors.size() != specs.size()) {
    fail(ErrorKind::kInvalidArgument, "save_model_dir: the weights hold ", weights.tensors.size(),
         " tensors but the config implies ", specs.size());
  }
  save_model_dir(WeightsTensorSource(weights), dir, dtype);
}

void write_model_dir_config(const ModelConfig& config, const std::string& dir,
                            const std::string& torch_dtype) {
  nlohmann::json config_json = model_config_to_json(config);
  config_json["torch_dtype"] = torch_dtype;
  write_text_atomically((std::filesystem::path(dir) / "config.json").string(),
                        config_json.dump(2) + "\n");
}

}  // namespace stoa
