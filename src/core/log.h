// Leveled logging to stderr: "2026-11-30T08:00:00.123Z I [component] message", and to a file as
// well once log_also_to_file names one (a run keeps its log in its run directory: an operator
// who started it in a terminal that has since closed still has the story).
// The level comes from STOA_LOG (debug|info|warn|error), default info.
#pragma once
#include <string>
#include <string_view>

#include "core/error.h"

namespace stoa {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
// From now on every line also goes to `path`, appended (created, with its directory; one file at
// a time: a second call replaces the first). kIo naming the file when it cannot be opened.
void log_also_to_file(const std::string& path);
void log_write(LogLevel level, std::string_view component, const std::string& message);

template <typename... Args>
void log_debug(std::string_view component, Args&&... args) {
  if (log_level() <= LogLevel::kDebug) log_write(LogLevel::kDebug, component, cat(args...));
}
template <typename... Args>
void log_info(std::string_view component, Args&&... args) {
  if (log_level() <= LogLevel::kInfo) log_write(LogLevel::kInfo, component, cat(args...));
}
template <typename... Args>
void log_warn(std::string_view component, Args&&... args) {
  if (log_level() <= LogLevel::kWarn) log_write(LogLevel::kWarn, component, cat(args...));
}
template <typename... Args>
void log_error(std::string_view component, Args&&... args) {
  log_write(LogLevel::kError, component, cat(args...));
}

}  // namespace stoa
