// The llama.cpp LoRA adapter GGUF (gguf_lora_adapter.h): the base's GGUF names from the same
// tensor plan the model export uses (gguf_arch_map.h), so base and adapter cannot disagree.
#include "model/gguf_lora_adapter.h"

#include <cstring>
#include <map>

#include "core/error.h"
#include "model/gguf_arch_map.h"
#include "model/gguf_writer.h"

namespace stoa {

namespace {

std::vector<uint8_t> f32_bytes(const Tensor& t) {
  std::vector<uint8_t> bytes(t.nbytes());
  std::memcpy(bytes.data(), t.data(), bytes.size());
  return bytes;
}

}  // namespace

GgufLoraAdapterSummary export_gguf_lora_adapter(const ModelConfig& config,
                                                const PeftAdapter& adapter, const std::string& path,
                                                const std::string& name) {
  STOA_CHECK(adapter.rank >= 1 && adapter.alpha > 0, ErrorKind::kInvalidArgument,
             "a LoRA adapter needs r >= 1 and lora_alpha > 0 (got ", adapter.rank, ", ",
             adapter.alpha, ")");
  // HF weight name -> its GGUF tensor; stacked (expert) members apart.
  std::map<std::string, const GgufTensorPlan*> single, stacked;
  const std::vector<GgufTensorPlan> plan = gguf_tensor_plan(config);
  for (const GgufTensorPlan& p : plan) {
    for (const std::string& source : p.sources)
      (p.sources.size() == 1 ? single : stacked)[source] = &p;
  }
  GgufWriter writer;
  writer.set("general.architecture", gguf::Value::string(gguf_arch_name(config.arch)));
  writer.set("general.type", gguf::Value::string("adapter"));
  if (!name.empty()) writer.set("general.name", gguf::Value::string(name));
  writer.set("general.alignment", gguf::Value::u32(static_cast<uint32_t>(gguf::kDefaultAlignment)));
  writer.set("adapter.type", gguf::Value::string("lora"));
  writer.set("adapter.lora.alpha", gguf::Value::f32(static_cast<float>(adapter.alpha)));

  GgufLoraAdapterSummary summary;
  summary.architecture = gguf_arch_name(config.arch);
  for (const auto& [tensor_name, a] : adapter.tensors) {
    const std::string module = peft_module_of(tensor_name);
    if (tensor_name != module + ".lora_A.weight") continue;  // each module once, at its A
    const std::string weight = module + ".weight";
    STOA_CHECK(!stacked.count(weight), ErrorKind::kUnsupported, "GGUF LoRA adapter: ", weight,
               " is a MoE expert matrix, which llama.cpp stacks into ",
               stacked.at(weight)->gguf_name,
               "; adapters on experts are not written (target the attention, conv and dense "
               "matrices)");
    auto found = single.find(weight);
    STOA_CHECK(found != single.end() && found->second->shape.size() == 2,
               ErrorKind::kInvalidArgument, "GGUF LoRA adapter: ", module, " is no matrix of the ",
               arch_name(config.arch), " base (another base model?)");
    const Shape& w = found->second->shape;  // [out, in]
    auto b_it = adapter.tensors.find(module + ".lora_B.weight");
    STOA_CHECK(b_it != adapter.tensors.end(), ErrorKind::kInvalidArgument,
               "GGUF LoRA adapter: ", module, " has an A but no B");
    const Tensor& b = b_it->second;
    STOA_CHECK(a.shape() == Shape({adapter.rank, w[1]}) && b.shape() == Shape({w[0], adapter.rank}),
               ErrorKind::kInvalidArgument, "GGUF LoRA adapter: ", module, " has A ",
               shape_string(a.shape()), " and B ", shape_string(b.shape()), "; the base's ", weight,
               " ", shape_string(w), " with r = ", adapter.rank, " makes A ",
               shape_string({adapter.rank, w[1]}), " and B ", shape_string({w[0], adapter.rank}),
               " (another base model?)");
    STOA_CHECK(a.dtype() == DType::kF32 && b.dtype() == DType::kF32, ErrorKind::kInvalidArgument,
               "GGUF LoRA adapter: ", module, "'s A and B must be f32");
    const std::string& gguf = found->second->gguf_name;
    writer.add_tensor(gguf + ".lora_a", gguf::GgmlType::kF32, {w[1], adapter.rank}, f32_bytes(a));
    writer.add_tensor(gguf + ".lora_b", gguf::GgmlType::kF32, {adapter.rank, w[0]}, f32_bytes(b));
    ++summary.matrices;
  }
  STOA_CHECK(summary.matrices > 0, ErrorKind::kInvalidArgument,
             "GGUF LoRA adapter: the adapter holds no LoRA matrices");
  writer.write(path);
  return summary;
}

}  // namespace stoa
