#include "env/jsonl.h"

#include <fstream>

#include "core/error.h"
#include "core/log.h"

namespace stoa::env {

JsonlStats read_jsonl(const std::string& path, BadLinePolicy policy,
                      const std::function<void(const nlohmann::json&, int64_t)>& visit) {
  std::ifstream in(path, std::ios::binary);
  STOA_CHECK(in.good(), ErrorKind::kIo, "cannot open ", path);
  JsonlStats stats;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    ++stats.lines;
    std::string problem;
    try {
      // allow_exceptions=false would lose the parser's message; parse errors are rare enough.
      nlohmann::json record = nlohmann::json::parse(line);
      visit(record, number);
      ++stats.records;
      continue;
    } catch (const nlohmann::json::exception& e) {
      problem = e.what();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kBadFormat && e.kind() != ErrorKind::kInvalidArgument) throw;
      problem = e.what();
    }
    if (policy == BadLinePolicy::kFatal)
      fail(ErrorKind::kBadFormat, path, ":", number, ": ", problem);
    ++stats.skipped;
    if (stats.skipped <= 5) log_warn("jsonl", path, ":", number, ": skipped: ", problem);
  }
  STOA_CHECK(!in.bad(), ErrorKind::kIo, "read error in ", path, " after line ", number);
  if (stats.skipped > 5) log_warn("jsonl", path, ": ", stats.skipped, " malformed lines skipped");
  return stats;
}

std::string json_string(const nlohmann::json& record, const char* field) {
  STOA_CHECK(record.is_object(), ErrorKind::kBadFormat, "record is not a JSON object");
  auto it = record.find(field);
  STOA_CHECK(it != record.end(), ErrorKind::kBadFormat, "missing field \"", field, "\"");
  STOA_CHECK(it->is_string(), ErrorKind::kBadFormat, "field \"", field, "\" is not a string");
  return it->get<std::string>();
}

std::string json_id(const nlohmann::json& record, const char* field) {
  STOA_CHECK(record.is_object(), ErrorKind::kBadFormat, "record is not a JSON object");
  auto it = record.find(field);
  if (it != record.end() && it->is_number_integer()) return std::to_string(it->get<int64_t>());
  return json_string(record, field);
}

}  // namespace stoa::env
