// Tokenizer: Hugging Face `tokenizer.json` byte-level BPE (Qwen, GPT-2, Llama-3 style).
//
// encode(): invalid UTF-8 -> U+FFFD, added tokens matched on the raw text (longest match), the
// normaliser (NFC, ...) on the text between them, added tokens with normalized=true matched on the
// normalised text, the pre-tokenizer (Split with the file's regex, ByteLevel), BPE per piece by
// merge rank, and the post-processor's template when add_special_tokens is set.
// decode(): ids -> bytes (GPT-2 byte map; added tokens verbatim) -> UTF-8 with U+FFFD for
// ill-formed sequences, exactly as the JS/Rust tokenizers do.
//
// A Tokenizer is a cheap handle (copies share one immutable state); every method is const and
// safe to call from many threads at once.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stoa {

struct TokenizerState;

class Tokenizer {
 public:
  // Loads tokenizer.json; a malformed, truncated or unsupported file throws stoa::Error naming
  // the file and the component or JSON field at fault.
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_json(const std::string& text, const std::string& source);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // Throws kInvalidArgument on an id outside [0, vocab_size()) or one no token has.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;
  // The raw bytes of the ids, without U+FFFD repair: for streaming, where a character's bytes
  // may arrive in different tokens.
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int64_t vocab_size() const;  // highest id + 1, added tokens included
  std::optional<int32_t> token_id(std::string_view token) const;  // e.g. "<|im_end|>"
  std::string token_text(int32_t id) const;  // the vocabulary spelling ("Ġthe"); "" if none
  bool is_special(int32_t id) const;
  // The file name (or the `source` given to from_json), for messages.
  const std::string& source() const;

 private:
  explicit Tokenizer(std::shared_ptr<const TokenizerState> state) : state_(std::move(state)) {}
  std::shared_ptr<const TokenizerState> state_;
};

}  // namespace stoa
