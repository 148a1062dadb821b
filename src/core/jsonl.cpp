#include "core/jsonl.h"

#include "core/error.h"
#include "core/log.h"

namespace stoa {
namespace {

constexpr int64_t kLoggedSkips = 5;  // enough to see the pattern, not a flood

}  // namespace

JsonlReader::JsonlReader(std::istream& in, std::string source)
    : in_(&in), source_(std::move(source)) {}

JsonlReader JsonlReader::open(const std::string& path) {
  auto file = std::make_unique<std::ifstream>(path, std::ios::binary);
  STOA_CHECK(file->good(), ErrorKind::kIo, "cannot open ", path);
  JsonlReader r(*file, path);
  r.file_ = std::move(file);
  return r;
}

std::optional<JsonlLine> JsonlReader::next() {
  std::string text;
  while (std::getline(*in_, text)) {
    ++number_;
    // getline stops at the end of the stream before a newline only on an unfinished line.
    const bool torn = in_->eof();
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    JsonlLine line;
    line.number = number_;
    line.torn = torn;
    try {
      // allow_exceptions=false would lose the parser's message; bad lines are rare.
      line.value = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      line.value = nlohmann::json(nlohmann::json::value_t::discarded);
      line.error = e.what();
    }
    return line;
  }
  STOA_CHECK(!in_->bad(), ErrorKind::kIo, "read error in ", source_, " after line ", number_);
  return std::nullopt;
}

JsonlStats read_jsonl(JsonlReader& reader, BadLinePolicy policy, const JsonlVisitor& visit) {
  JsonlStats stats;
  while (auto line = reader.next()) {
    ++stats.lines;
    std::string problem = line->error;
    if (line->ok()) {
      try {
        visit(line->value, line->number);
        ++stats.records;
        continue;
      } catch (const nlohmann::json::exception& e) {
        problem = e.what();
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kBadFormat && e.kind() != ErrorKind::kInvalidArgument) throw;
        problem = e.what();
      }
    }
    const bool skip = policy == BadLinePolicy::kSkip ||
                      (policy == BadLinePolicy::kSkipTornLastLine && line->torn);
    if (!skip) fail(ErrorKind::kBadFormat, reader.source(), ":", line->number, ": ", problem);
    ++stats.skipped;
    if (policy == BadLinePolicy::kSkip && stats.skipped <= kLoggedSkips)
      log_warn("jsonl", reader.source(), ":", line->number, ": skipped: ", problem);
  }
  if (policy == BadLinePolicy::kSkip && stats.skipped > kLoggedSkips)
    log_warn("jsonl", reader.source(), ": ", stats.skipped, " malformed lines skipped");
  return stats;
}

JsonlStats read_jsonl(const std::string& path, BadLinePolicy policy, const JsonlVisitor& visit) {
  JsonlReader reader = JsonlReader::open(path);
  return read_jsonl(reader, policy, visit);
}

JsonlWriter::JsonlWriter(const std::string& path, Mode mode)
    : out_(path, std::ios::binary | (mode == Mode::kAppend ? std::ios::app : std::ios::trunc)),
      path_(path) {
  STOA_CHECK(out_.good(), ErrorKind::kIo, "cannot open ", path, " for writing");
}

void JsonlWriter::write(const nlohmann::json& record) {
  out_ << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

void JsonlWriter::flush() {
  out_.flush();
  STOA_CHECK(out_.good(), ErrorKind::kIo, "write failed: ", path_);
}

void write_jsonl(const std::string& path, const std::vector<nlohmann::json>& records) {
  JsonlWriter out(path, JsonlWriter::Mode::kTruncate);
  for (const auto& record : records) out.write(record);
  out.flush();
}

}  // namespace stoa
