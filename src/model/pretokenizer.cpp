#include "model/pretokenizer.h"

#include <algorithm>
#include <cstdint>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "model/tokenizer_json.h"
#include "model/unicode.h"

namespace stoa {

const char* const kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

constexpr const char* kWordChars =
    R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE})";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

std::string oniguruma_to_pcre2(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char e = pattern[++i];
      const char* outside = nullptr;
      const char* inside = nullptr;
      switch (e) {
        case 's':
          outside = inside = R"(\p{White_Space})";
          break;
        case 'S':
          outside = inside = R"(\P{White_Space})";
          break;
        case 'd':
          outside = inside = R"(\p{Nd})";
          break;
        case 'D':
          outside = inside = R"(\P{Nd})";
          break;
        case 'h':
          outside = "[0-9A-Fa-f]";
          inside = "0-9A-Fa-f";
          break;
        case 'H':
          outside = "[^0-9A-Fa-f]";
          break;
        default:
          break;
      }
      std::string word_class;
      if (e == 'w') {
        word_class = cat("[", kWordChars, "]");
        outside = word_class.c_str();
        inside = kWordChars;
      } else if (e == 'W' && !in_class) {
        word_class = cat("[^", kWordChars, "]");
        outside = word_class.c_str();
      }
      const char* rewrite = in_class ? inside : outside;
      if (rewrite) {
        out += rewrite;
      } else {
        // Everything else (\p{..}, \x{..}, \r, \n, escaped punctuation, \W or \H inside a class)
        // means the same in PCRE2.
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      size_t close = pattern.find(":]", i + 2);  // POSIX class such as [:alpha:]
      if (close != std::string::npos) {
        out.append(pattern, i, close + 2 - i);
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct Regex::Impl {
  pcre2_code* code = nullptr;
  std::string what;
};

Regex::Regex(const std::string& pattern, bool literal, const std::string& what)
    : impl_(std::make_unique<Impl>()) {
  impl_->what = what;
  std::string translated = literal ? pattern : oniguruma_to_pcre2(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2 refuses UCP together with LITERAL (it means nothing for a literal).
  uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                              options, &error, &offset, nullptr);
  if (!impl_->code) {
    fail(ErrorKind::kBadFormat, what, ": regex /", pattern, "/ does not compile (as /", translated,
         "/ at offset ", offset, "): ", pcre2_message(error));
  }
  // JIT is an optimisation only: if it is unavailable the interpreter gives the same matches.
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() {
  if (impl_ && impl_->code) pcre2_code_free(impl_->code);
}

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(impl_->code, nullptr), &pcre2_match_data_free);
  std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context(
      pcre2_match_context_create(nullptr), &pcre2_match_context_free);
  // PCRE2's default limit (10M backtracking steps) trips on a legitimate but long whitespace run
  // (`\s*[\r\n]+` scans the run before `\s+(?!\S)` takes it): scale the limit with the text.
  pcre2_set_match_limit(context.get(), static_cast<uint32_t>(std::min<size_t>(
                                           UINT32_MAX, 10'000'000 + 64 * text.size())));
  std::unique_ptr<pcre2_jit_stack, decltype(&pcre2_jit_stack_free)> stack(nullptr,
                                                                          &pcre2_jit_stack_free);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    // The text was validated once by the caller; skip PCRE2's per-call UTF check (it is O(n)
    // per match, which would make pre-tokenization quadratic).
    int rc = pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, data.get(),
                         context.get());
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !stack) {
      // The default 32 KiB JIT stack overflows on long runs; retry this match with 64 MiB max.
      stack.reset(pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr));
      pcre2_jit_stack_assign(context.get(), nullptr, stack.get());
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      fail(ErrorKind::kInvalidArgument, impl_->what, ": regex match failed at byte ", pos, ": ",
           pcre2_message(rc));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.get());
    size_t begin = ov[0], end = ov[1];
    if (end == begin) {
      // Empty matches do not cut the text (as in the Rust crate); step one code point on.
      size_t next = begin;
      unicode::next_code_point(text, next);
      pos = next;
      continue;
    }
    out.emplace_back(begin, end);
    pos = end;
  }
}

namespace {

using tokjson::Json;

SplitBehavior parse_behavior(const std::string& name, const std::string& source,
                             const std::string& where) {
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  tokjson::bad(source, where, cat("unknown Split behavior \"", name, "\""));
}

struct Span {
  size_t begin, end;
  bool is_match;
};

// Applies a split behaviour to the alternating gap/match spans of one piece (the Rust crate's
// SplitDelimiterBehavior, including its treatment of runs of adjacent matches).
std::vector<Span> apply_behavior(std::vector<Span> spans, SplitBehavior behavior) {
  std::vector<Span> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      return spans;
    case SplitBehavior::kRemoved:
      for (const Span& s : spans)
        if (!s.is_match) out.push_back(s);
      return out;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return out;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_match = it->is_match;
      }
      return {out.rbegin(), out.rend()};
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return out;
  }
  return spans;
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const Json& spec, const std::string& source) {
  PreTokenizer pt;
  std::vector<std::pair<const Json*, std::string>> steps;
  if (spec.is_null()) {
    fail(ErrorKind::kUnsupported, source,
         ": pre_tokenizer is null; only byte-level BPE (with a ByteLevel pre-tokenizer) is "
         "supported");
  }
  std::string type = tokjson::string_at(spec, "type", source, "pre_tokenizer");
  if (type == "Sequence") {
    const Json& list = tokjson::object_at(spec, "pretokenizers", source, "pre_tokenizer");
    if (!list.is_array()) tokjson::bad(source, "pre_tokenizer.pretokenizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      steps.emplace_back(&list[i], cat("pre_tokenizer.pretokenizers[", i, "]"));
  } else {
    steps.emplace_back(&spec, "pre_tokenizer");
  }
  bool seen_byte_level = false;
  for (const auto& [step, where] : steps) {
    std::string kind = tokjson::string_at(*step, "type", source, where);
    if (seen_byte_level) {
      fail(ErrorKind::kUnsupported, source, ": ", where, ": a ", kind,
           " step after ByteLevel is not supported (ByteLevel must come last)");
    }
    if (kind == "Split") {
      Split split;
      const Json& pattern = tokjson::object_at(*step, "pattern", source, where);
      std::string what = cat(source, ": ", where, ".pattern");
      if (tokjson::has(pattern, "Regex")) {
        split.regex = std::make_shared<Regex>(
            tokjson::string_at(pattern, "Regex", source, where + ".pattern"), false, what);
      } else if (tokjson::has(pattern, "String")) {
        split.regex = std::make_shared<Regex>(
            tokjson::string_at(pattern, "String", source, where + ".pattern"), true, what);
      } else {
        tokjson::bad(source, where + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
      }
      split.behavior = parse_behavior(tokjson::string_at(*step, "behavior", source, where), source,
                                      where + ".behavior");
      split.invert = tokjson::bool_or(*step, "invert", false, source, where);
      pt.splits_.push_back(std::move(split));
    } else if (kind == "ByteLevel") {
      seen_byte_level = true;
      pt.add_prefix_space_ = tokjson::bool_or(*step, "add_prefix_space", false, source, where);
      if (tokjson::bool_or(*step, "use_regex", true, source, where)) {
        pt.byte_level_regex_ = std::make_shared<Regex>(kGpt2SplitRegex, false,
                                                       cat(source, ": ", where, " (GPT-2 regex)"));
      }
    } else {
      fail(ErrorKind::kUnsupported, source, ": ", where, ": pre-tokenizer type \"", kind,
           "\" is not supported (supported: Sequence, Split, ByteLevel)");
    }
  }
  if (!seen_byte_level) {
    fail(ErrorKind::kUnsupported, source,
         ": pre_tokenizer has no ByteLevel step; only byte-level BPE is supported");
  }
  return pt;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces,
                         std::deque<std::string>& arena) const {
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  std::vector<std::pair<size_t, size_t>> matches;
  std::vector<Span> spans;
  auto cut = [&](const Regex& regex, SplitBehavior behavior, bool invert) {
    next.clear();
    for (std::string_view piece : current) {
      matches.clear();
      regex.find_all(piece, matches);
      if (behavior == SplitBehavior::kIsolated) {  // the common case: every gap and match
        size_t prev = 0;
        for (auto [b, e] : matches) {
          if (b > prev) next.push_back(piece.substr(prev, b - prev));
          next.push_back(piece.substr(b, e - b));
          prev = e;
        }
        if (prev < piece.size()) next.push_back(piece.substr(prev));
        continue;
      }
      spans.clear();
      size_t prev = 0;
      for (auto [b, e] : matches) {
        if (b > prev) spans.push_back({prev, b, invert});
        spans.push_back({b, e, !invert});
        prev = e;
      }
      if (prev < piece.size()) spans.push_back({prev, piece.size(), invert});
      for (const Span& s : apply_behavior(spans, behavior)) {
        if (s.end > s.begin) next.push_back(piece.substr(s.begin, s.end - s.begin));
      }
    }
    current.swap(next);
  };
  for (const Split& s : splits_) cut(*s.regex, s.behavior, s.invert);
  if (add_prefix_space_) {
    for (std::string_view& piece : current) {
      if (!piece.empty() && piece.front() != ' ') {
        arena.push_back(cat(" ", piece));
        piece = arena.back();
      }
    }
  }
  if (byte_level_regex_) cut(*byte_level_regex_, SplitBehavior::kRemoved, true);
  for (std::string_view piece : current)
    if (!piece.empty()) pieces.push_back(piece);
}

}  // namespace stoa
