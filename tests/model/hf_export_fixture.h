// A source model directory for the export-hf tests: a preset's seeded random weights in f32
// (config.json + model.safetensors) and a small tokenizer with every companion file a published
// model carries — tokenizer.json, tokenizer_config.json with a ChatML chat_template,
// chat_template.jinja, special_tokens_map.json and a generation_config.json of its own.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "model/presets.h"
#include "model/tiny_tokenizer.h"
#include "model/weights.h"

namespace stoa::test {

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline constexpr const char* kChatTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

// 256 byte tokens, two merges (256, 257), three special tokens: <|endoftext|> 258, <|im_start|>
// 259, <|im_end|> 260 — inside every tiny preset's vocabulary of 512.
inline void write_tokenizer_files(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  TinySpec spec;
  spec.merges = {{"h", "e"}, {"l", "l"}};
  spec.added = {added_token("<|endoftext|>", true), added_token("<|im_start|>", true),
                added_token("<|im_end|>", true)};
  write_file(dir / "tokenizer.json", tiny_tokenizer_json(spec).dump(2));
  const nlohmann::json tok_config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                     {"eos_token", "<|im_end|>"},
                                     {"pad_token", "<|endoftext|>"},
                                     {"chat_template", kChatTemplate}};
  write_file(dir / "tokenizer_config.json", tok_config.dump(2));
  write_file(dir / "chat_template.jinja", kChatTemplate);
  write_file(dir / "special_tokens_map.json",
             nlohmann::json{{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}}.dump(2));
  // Like Qwen3's: an eos list, the publisher's sampling and a filter Stoa's sampler lacks.
  write_file(dir / "generation_config.json", nlohmann::json{{"eos_token_id", {260, 258}},
                                                            {"do_sample", true},
                                                            {"temperature", 0.6},
                                                            {"top_p", 0.95},
                                                            {"top_k", 20},
                                                            {"repetition_penalty", 1.05},
                                                            {"transformers_version", "4.51.0"}}
                                                 .dump(2));
}

// `weights` (f32) saved as a model directory with the tokenizer files beside them.
inline void write_source_model(const ModelWeights& weights, const std::filesystem::path& dir) {
  save_model_dir(weights, dir.string(), DType::kF32);
  write_tokenizer_files(dir);
}

inline ModelConfig with_token_ids(ModelConfig config) {
  config.bos_token_id = 259;
  config.eos_token_id = 260;
  config.pad_token_id = 258;
  return config;
}

}  // namespace stoa::test
