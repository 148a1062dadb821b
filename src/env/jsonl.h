// Line-by-line JSONL reading with errors that name the file and the line. Real corpora are large
// and sometimes dirty: a caller chooses whether a malformed line is fatal or skipped (and counted).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace stoa::env {

enum class BadLinePolicy { kFatal, kSkip };

struct JsonlStats {
  int64_t lines = 0;    // non-empty lines seen
  int64_t records = 0;  // lines handed to the visitor successfully
  int64_t skipped = 0;  // malformed lines skipped (kSkip only)
};

// Calls visit(record, line_number) for every non-empty line of path. A line that is not valid JSON,
// or for which visit throws stoa::Error, is malformed: with kFatal a kBadFormat error
// "path:line: what" is thrown; with kSkip it is logged (the first few) and counted.
// Blank lines are ignored. Throws kIo if the file cannot be opened.
JsonlStats read_jsonl(const std::string& path, BadLinePolicy policy,
                      const std::function<void(const nlohmann::json&, int64_t)>& visit);

// Required string field; throws kBadFormat naming the field when missing or not a string.
std::string json_string(const nlohmann::json& record, const char* field);
// Required id: a string, or an integer (PubMed ids often are) kept as its decimal text.
std::string json_id(const nlohmann::json& record, const char* field);

}  // namespace stoa::env
