// A LoRA checkpoint exported (lora_export.h): the trainer resumed on its base gives the merged
// model (one tensor at a time) and the adapters; the base's hash check is the trainer's own.
#include "app/export/lora_export.h"

#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "model/gguf_source.h"
#include "model/peft_adapter.h"
#include "model/tensor_source.h"
#include "model/weights.h"
#include "train/lora.h"
#include "train/trainer.h"

namespace stoa::app {
namespace fs = std::filesystem;

nlohmann::json export_lora_checkpoint(const LoraExportRequest& request) {
  const fs::path out(request.out);
  std::error_code ec;
  STOA_CHECK(!fs::exists(out, ec) || (fs::is_directory(out, ec) && fs::is_empty(out, ec)),
             ErrorKind::kInvalidArgument, "export-hf: ", request.out,
             " exists and is not empty; an export never writes over files");
  const std::unique_ptr<TensorSource> base = open_model_dir_source(request.base_dir);
  train::TrainOptions options;  // the LoRA settings come from the checkpoint
  const train::Trainer trainer = train::Trainer::resume(request.checkpoint, *base, options);
  const train::LoraOptions& lora = trainer.options().lora;

  const std::string merged_dir = request.adapter ? (out / "merged").string() : request.out;
  const HfExportResult merged = export_hf(*trainer.model_source(), merged_dir, request.hf);
  nlohmann::json summary = {
      {"tensors", merged.tensors},
      {"shards", merged.shards},
      {"tensor_bytes", merged.tensor_bytes},
      {"files", merged.files},
      {"chat_template", merged.chat_template.empty() ? nlohmann::json(nullptr)
                                                     : nlohmann::json(merged.chat_template)},
      {"model_type", arch_name(trainer.config().arch)},
      {"base_dir", request.base_dir},
      {"rank", lora.rank},
      {"alpha", lora.alpha}};
  if (!request.adapter) return summary;

  PeftAdapter adapter;
  adapter.rank = lora.rank;
  adapter.alpha = lora.alpha;
  adapter.dropout = lora.dropout;
  adapter.target_modules = train::peft_target_modules(trainer.config(), lora);
  adapter.base_model =
      request.base_name.empty() ? fs::absolute(request.base_dir).string() : request.base_name;
  adapter.base_hash = trainer.base_hash();
  adapter.base_hash_dtype = dtype_name(lora.base_dtype);
  trainer.for_each_adapter([&](const std::string& name, const Shape& shape, const float* values) {
    Tensor copy(DType::kF32, shape);
    std::memcpy(copy.data(), values, copy.nbytes());
    adapter.tensors.emplace(name, std::move(copy));
  });
  const std::string adapter_dir = (out / "adapter").string();
  write_peft_adapter(adapter_dir, adapter);
  summary["adapter_dir"] = adapter_dir;
  summary["merged_dir"] = merged_dir;
  summary["adapter_tensors"] = adapter.tensors.size();
  summary["target_modules"] = adapter.target_modules;
  return summary;
}

}  // namespace stoa::app
