// The immutable state behind a Tokenizer handle (internal to model/): vocabulary, added tokens,
// the pipeline components parsed from tokenizer.json.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/pretokenizer.h"
#include "model/tokenizer_bpe.h"
#include "model/unicode.h"

namespace stoa {

struct AddedToken {
  std::string content;
  std::string match;  // what is looked for in the text: content, normalised if `normalized`
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool single_word = false;
};

// Finds added tokens in text: at each position the longest token that starts there (the JS
// oracle's trie split). Candidates are bucketed by first byte, longest first.
class AddedTokenMatcher {
 public:
  void add(std::string_view content, size_t index);
  bool empty() const { return count_ == 0; }
  // First match at or after pos: sets begin and returns the token index, or -1 if none.
  int64_t find(std::string_view text, size_t pos, size_t& begin,
               const std::vector<AddedToken>& tokens) const;

 private:
  std::array<std::vector<size_t>, 256> by_first_byte_;
  size_t count_ = 0;
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct TokenizerState {
  std::string source;
  std::vector<std::string> id_to_token;  // "" where no token has the id
  std::vector<std::string> id_bytes;     // what each id decodes to
  std::vector<uint8_t> has_token;
  std::vector<uint8_t> special;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> token_to_id;

  std::vector<AddedToken> added_tokens;
  AddedTokenMatcher raw_matcher;         // normalized == false: matched before normalisation
  AddedTokenMatcher normalized_matcher;  // normalized == true: matched after

  std::vector<unicode::NormalForm> normalizer;  // applied in order
  PreTokenizer pre_tokenizer;
  std::unique_ptr<BpeModel> bpe;
  bool ignore_merges = false;

  // add_special_tokens template (TemplateProcessing "single"): ids, kSequence marks the text.
  static constexpr int32_t kSequence = -1;
  std::vector<int32_t> template_single{kSequence};
};

// Parses tokenizer.json text into a state (tokenizer_load.cpp).
std::shared_ptr<const TokenizerState> load_tokenizer_state(const std::string& text,
                                                           const std::string& source);

}  // namespace stoa
