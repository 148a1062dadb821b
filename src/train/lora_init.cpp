// A LoRA trainer started from a PEFT adapter (LoraOptions::init_adapter): the adapter is read
// (model/peft_adapter.h) and checked (check_peft_adapter, lora.h) torch-free, the base named by
// hash when Stoa wrote the adapter,
// then its tensors replace the random A and zero B in place (the math holds the same storage).
#include "core/error.h"
#include "core/log.h"
#include "model/peft_adapter.h"
#include "train/lora.h"
#include "train/policy_model.h"

namespace stoa::train {

void PolicyModel::load_peft_adapter(const std::string& dir) {
  STOA_CHECK(lora(), ErrorKind::kInvalidArgument, "a PEFT adapter (", dir,
             ") can start a LoRA trainer only (set a LoRA rank)");
  const PeftAdapter adapter = read_peft_adapter(dir);
  check_peft_adapter(adapter, config_, lora_, dir);
  if (!adapter.base_hash.empty()) {
    // The hash is of the base as held; a base held in another dtype hashes otherwise, and then
    // only the shapes (checked above) speak for the base.
    if (adapter.base_hash_dtype == dtype_name(lora_.base_dtype)) {
      const std::string actual = parameters_hash().hex();
      STOA_CHECK(actual == adapter.base_hash, ErrorKind::kIntegrity, "LoRA adapter ", dir,
                 " was trained on a base with hash ", adapter.base_hash, "; this base hashes to ",
                 actual, " (another model)");
    } else {
      log_warn("train", "LoRA adapter ", dir, " names its base by a hash taken in ",
               adapter.base_hash_dtype, "; this run holds the base in ",
               dtype_name(lora_.base_dtype), ", so only the shapes are checked");
    }
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < adapters_.size(); ++i) {
    const Tensor& values = adapter.tensors.at(adapter_names_[i]);
    adapters_[i].copy_(to_torch(values).to(adapters_[i].device()));
  }
  log_info("train", "LoRA adapters started from ", dir, " (", adapter.tensors.size(),
           " tensors, rank ", adapter.rank, ")");
}

}  // namespace stoa::train
