// Pre-tokenization for byte-level BPE: the tokenizer.json `pre_tokenizer` (Split with the regex
// from the file, ByteLevel, Sequence of them) cuts normalised text into pieces that BPE then
// encodes independently. Regexes are Oniguruma syntax (what the Rust `tokenizers` crate uses);
// we translate the few escapes whose meaning differs and compile with PCRE2 (UTF + UCP + JIT).
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace stoa {

// A compiled regex; immutable and safe to use from many threads at once.
class Regex {
 public:
  // `pattern` in Oniguruma syntax unless literal; `what` names it in errors.
  Regex(const std::string& pattern, bool literal, const std::string& what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Appends [begin, end) byte offsets of every non-empty, non-overlapping match in valid UTF-8.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Rewrites Oniguruma escapes to the PCRE2 spelling of the same set, as the JS oracle does for
// JS: \s -> White_Space, \d -> Nd, \w -> Alphabetic|M|Nd|Pc (+ a few Latin-1 digits), \h -> hex.
std::string oniguruma_to_pcre2(const std::string& pattern);

// GPT-2's split regex, used by ByteLevel when use_regex is true.
extern const char* const kGpt2SplitRegex;

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  // Parses the `pre_tokenizer` value; `source` names the file in errors. Requires a ByteLevel step
  // (we implement byte-level BPE only), and it must be the last step.
  static PreTokenizer from_json(const nlohmann::json& spec, const std::string& source);

  // Cuts valid UTF-8 text into pieces. Views point into `text` or into `arena` (pieces that got a
  // prefix space), so both must outlive the result.
  void split(std::string_view text, std::vector<std::string_view>& pieces,
             std::deque<std::string>& arena) const;

 private:
  struct Split {
    std::shared_ptr<const Regex> regex;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
  };
  std::vector<Split> splits_;
  bool add_prefix_space_ = false;
  std::shared_ptr<const Regex> byte_level_regex_;  // null when use_regex is false
};

}  // namespace stoa
