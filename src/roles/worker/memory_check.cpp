#include "roles/worker/memory_check.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "core/error.h"

namespace stoa::worker {
namespace {

// The value of `key` in /proc/meminfo, in bytes.
std::optional<uint64_t> meminfo(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  uint64_t kb = 0;
  std::string unit;
  while (in >> name >> kb) {
    std::getline(in, unit);
    if (name == key + ":") return kb * 1024;
  }
  return std::nullopt;
}

std::optional<uint64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;  // "max": no limit
  return std::stoull(text);
}

}  // namespace

std::optional<uint64_t> memory_available(std::optional<uint64_t> limit_bytes) {
  std::optional<uint64_t> best = meminfo("MemAvailable");
  auto lower = [&best](uint64_t v) { best = best ? std::min(*best, v) : v; };
  const auto cg_max = read_number("/sys/fs/cgroup/memory.max");
  const auto cg_used = read_number("/sys/fs/cgroup/memory.current");
  if (cg_max && cg_used) lower(*cg_max > *cg_used ? *cg_max - *cg_used : 0);
  if (limit_bytes) lower(*limit_bytes);
  return best;
}

void check_memory(const MemoryNeed& need, uint64_t available) {
  STOA_CHECK(available >= need.total(), ErrorKind::kIo,
             "not enough memory for the model: it needs about ", human_bytes(need.total()), " (",
             human_bytes(need.weights_bytes), " of int8 weights + ", human_bytes(need.margin_bytes),
             " for the KV cache and the runtime), ", human_bytes(available), " is available");
}

std::optional<uint64_t> disk_free(const std::string& dir) {
  struct statvfs s {};
  if (statvfs(dir.c_str(), &s) != 0) return std::nullopt;
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

}  // namespace stoa::worker
