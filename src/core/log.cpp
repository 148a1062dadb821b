#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>

namespace stoa {

static LogLevel level_from_env() {
  const char* env = std::getenv("STOA_LOG");
  if (!env) return LogLevel::kInfo;
  if (!std::strcmp(env, "debug")) return LogLevel::kDebug;
  if (!std::strcmp(env, "warn")) return LogLevel::kWarn;
  if (!std::strcmp(env, "error")) return LogLevel::kError;
  return LogLevel::kInfo;
}

static std::atomic<int>& level_slot() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

LogLevel log_level() {
  return static_cast<LogLevel>(level_slot().load(std::memory_order_relaxed));
}
void set_log_level(LogLevel level) {
  level_slot().store(static_cast<int>(level));
}

namespace {

std::mutex& log_mutex() {
  static std::mutex mutex;
  return mutex;
}

// The file every line also goes to (nullptr: none), under log_mutex(). The last one is never
// closed: a line logged while the process exits still has somewhere to go.
std::FILE*& log_file() {
  static std::FILE* file = nullptr;
  return file;
}

}  // namespace

void log_also_to_file(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::FILE* f = std::fopen(path.c_str(), "a");
  STOA_CHECK(f != nullptr, ErrorKind::kIo, "log: cannot open ", path);
  std::setvbuf(f, nullptr, _IOLBF, 0);  // a line is on disk when the process dies
  std::lock_guard<std::mutex> lock(log_mutex());
  if (log_file()) std::fclose(log_file());
  log_file() = f;
}

void log_write(LogLevel level, std::string_view component, const std::string& message) {
  static const char kLetters[] = {'D', 'I', 'W', 'E'};
  auto now = std::chrono::system_clock::now();
  std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm utc;
  gmtime_r(&seconds, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &utc);
  std::lock_guard<std::mutex> lock(log_mutex());
  for (std::FILE* out : {stderr, log_file()}) {
    if (!out) continue;
    std::fprintf(out, "%s.%03dZ %c [%.*s] %s\n", stamp, millis, kLetters[static_cast<int>(level)],
                 static_cast<int>(component.size()), component.data(), message.c_str());
  }
}

}  // namespace stoa
