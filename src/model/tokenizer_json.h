// Small checked accessors for reading tokenizer.json: every failure names the file and the JSON
// path of the offending field, so a malformed file reads as "x.json: model.merges[3]: ...".
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace stoa::tokjson {

using Json = nlohmann::json;

[[noreturn]] inline void bad(const std::string& source, const std::string& where,
                             const std::string& what) {
  fail(ErrorKind::kBadFormat, source, ": ", where, ": ", what);
}

inline const Json& object_at(const Json& parent, const char* key, const std::string& source,
                             const std::string& where) {
  if (!parent.is_object()) bad(source, where, "expected a JSON object");
  auto it = parent.find(key);
  if (it == parent.end()) bad(source, where, cat("missing field \"", key, "\""));
  return *it;
}

inline bool has(const Json& parent, const char* key) {
  return parent.is_object() && parent.contains(key) && !parent.at(key).is_null();
}

inline std::string string_at(const Json& parent, const char* key, const std::string& source,
                             const std::string& where) {
  const Json& v = object_at(parent, key, source, where);
  if (!v.is_string()) bad(source, cat(where, ".", key), "expected a string");
  return v.get<std::string>();
}

inline bool bool_or(const Json& parent, const char* key, bool fallback, const std::string& source,
                    const std::string& where) {
  if (!has(parent, key)) return fallback;
  const Json& v = parent.at(key);
  if (!v.is_boolean()) bad(source, cat(where, ".", key), "expected true or false");
  return v.get<bool>();
}

// Ids index dense tables, so an absurd id in a corrupt file must not become a huge allocation;
// real vocabularies stay far below 2^24.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

inline int32_t id_of(const Json& v, const std::string& source, const std::string& where) {
  if (!v.is_number_integer()) bad(source, where, "expected an integer token id");
  auto id = v.get<int64_t>();
  if (id < 0 || id > kMaxTokenId) {
    bad(source, where, cat("token id ", id, " out of range [0, ", kMaxTokenId, "]"));
  }
  return static_cast<int32_t>(id);
}

// tokenizer.json parsed with model.vocab and model.merges streamed into flat lists (when they
// are an object and an array; otherwise they stay in the DOM for the loader to reject).
struct ParsedTokenizerJson {
  struct MergeEntry {
    std::string a;  // the whole "a b" string when !pair
    std::string b;
    bool pair = true;  // ["a", "b"] form
  };
  Json root;
  bool vocab_streamed = false;
  std::vector<std::pair<std::string, int64_t>> vocab;
  bool vocab_error_seen = false;
  std::string vocab_error;  // the key of the first non-integer vocab value
  bool merges_streamed = false;
  std::vector<MergeEntry> merges;
  int64_t merge_error = -1;  // index of the first malformed merge
};

// Throws kBadFormat naming `source` if the text is not JSON.
ParsedTokenizerJson parse_tokenizer_json(const std::string& text, const std::string& source);

}  // namespace stoa::tokjson
