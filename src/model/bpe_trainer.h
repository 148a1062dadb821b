// Byte-level BPE training (GPT-2 / Qwen style): count pre-tokenized words of a corpus, then
// repeatedly merge the most frequent adjacent pair. The result is written as a Hugging Face
// tokenizer.json (loadable by our Tokenizer and by @huggingface/tokenizers) plus a
// tokenizer_config.json with a ChatML chat template.
//
// Determinism: the best pair is the one with the highest count; ties go to the pair whose
// (left bytes, right bytes) is lexicographically smallest (unsigned byte order). Counts are
// exact, so the merges depend only on the corpus text, never on hash or thread order.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace stoa {

// Qwen2/Qwen3's split regex (GPT-4 style, single digits).
extern const char* const kQwenSplitRegex;

struct BpeTrainerOptions {
  int64_t vocab_size = 8192;  // everything: 256 bytes + merges + special + added tokens
  int64_t min_frequency = 2;  // a pair seen fewer times is never merged
  // Special tokens (special=true: control tokens, dropped by decode(skip_special_tokens)).
  std::vector<std::string> special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  // Added non-special tokens: the task's tags. One id each, so the model emits and the
  // environment parses them reliably, yet they stay visible in skip-special decoding (as Qwen3
  // treats <think> and <tool_call>).
  std::vector<std::string> added_tokens = {"<search>",  "</search>",     "<answer>",
                                           "</answer>", "<information>", "</information>",
                                           "<think>",   "</think>"};
  std::string split_regex = kQwenSplitRegex;
};

struct TrainedBpe {
  std::vector<std::string> tokens;                  // raw bytes of each id's token, in id order
  std::vector<std::pair<int32_t, int32_t>> merges;  // in rank order
  BpeTrainerOptions options;
  int32_t first_special_id = 0;  // ids from here: special tokens, then added tokens

  std::string tokenizer_json() const;
  std::string tokenizer_config_json() const;
  // Writes tokenizer.json and tokenizer_config.json into dir (created if needed).
  void write(const std::string& dir) const;
};

class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainerOptions options);
  ~BpeTrainer();
  // Counts the words of one document (special and added tokens in it are cut out, not learned).
  // Invalid UTF-8 is repaired to U+FFFD as the tokenizer would.
  void add_text(std::string_view text);
  int64_t word_count() const;  // distinct words so far
  TrainedBpe train() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoa
