// JSONL (one JSON value per line): the one reader and writer. Errors name the file and the line.
// Real files are large and sometimes dirty, and logs are read while a process is still writing
// them: a caller chooses whether a malformed line is fatal, skipped (and counted), or skipped
// only when it is a torn last line (no newline yet: the writer has not finished it).
#pragma once
#include <cstdint>
#include <fstream>
#include <functional>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stoa {

// One non-blank line of a JSONL file.
struct JsonlLine {
  int64_t number = 0;    // 1-based line number
  nlohmann::json value;  // discarded (is_discarded()) when the line is not valid JSON
  std::string error;     // why it is not valid JSON ("" when it is)
  bool torn = false;     // the last line, with no newline after it
  bool ok() const { return error.empty(); }
};

// Line by line, blank lines (spaces, tabs, a trailing '\r') skipped.
class JsonlReader {
 public:
  // Reads `in` (owned by the caller, who keeps it alive); `source` names it in messages.
  JsonlReader(std::istream& in, std::string source);
  // Opens a file; throws kIo when it cannot be opened.
  static JsonlReader open(const std::string& path);

  // The next non-blank line, nullopt at the end. Throws kIo on a read error.
  std::optional<JsonlLine> next();
  const std::string& source() const { return source_; }

 private:
  std::unique_ptr<std::ifstream> file_;  // set when opened here
  std::istream* in_;
  std::string source_;
  int64_t number_ = 0;
};

enum class BadLinePolicy {
  kFatal,             // a malformed line throws kBadFormat "<path>:<line>: <what>"
  kSkip,              // it is skipped and counted; the first few are logged
  kSkipTornLastLine,  // only a torn last line is skipped (silently); any other is fatal
};

struct JsonlStats {
  int64_t lines = 0;    // non-empty lines seen
  int64_t records = 0;  // lines handed to the visitor successfully
  int64_t skipped = 0;  // malformed lines skipped
};

using JsonlVisitor = std::function<void(const nlohmann::json& record, int64_t line_number)>;

// Calls visit(record, line_number) for every non-blank line. A line that is not valid JSON, or
// for which visit throws stoa::Error of kind kBadFormat or kInvalidArgument (or a
// nlohmann::json exception: a missing field, a wrong type), is malformed and handled by
// `policy`. Throws kIo if the file cannot be opened.
JsonlStats read_jsonl(const std::string& path, BadLinePolicy policy, const JsonlVisitor& visit);
JsonlStats read_jsonl(JsonlReader& reader, BadLinePolicy policy, const JsonlVisitor& visit);

// Appends one compact line per record. Invalid UTF-8 in strings is replaced (U+FFFD) rather
// than thrown on: a dataset's odd byte must not lose a whole file.
class JsonlWriter {
 public:
  enum class Mode { kTruncate, kAppend };
  JsonlWriter() = default;
  // Throws kIo when the file cannot be opened.
  JsonlWriter(const std::string& path, Mode mode);
  bool is_open() const { return out_.is_open(); }
  const std::string& path() const { return path_; }
  void write(const nlohmann::json& record);
  // Hands what was written to the OS; throws kIo if a write failed.
  void flush();

 private:
  std::ofstream out_;
  std::string path_;
};

// Writes `records` to `path` (replacing it). Throws kIo on failure.
void write_jsonl(const std::string& path, const std::vector<nlohmann::json>& records);

}  // namespace stoa
