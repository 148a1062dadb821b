#include "core/machine.h"

#include <time.h>

#include <cstdlib>
#include <fstream>

namespace stoa {
namespace {

ProcessMemory read_status(const std::string& path) {
  ProcessMemory m;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    // "VmRSS:     1234 kB"
    if (line.rfind("VmRSS:", 0) == 0) m.rss_bytes = std::stoull(line.substr(6)) * 1024;
    if (line.rfind("VmHWM:", 0) == 0) m.hwm_bytes = std::stoull(line.substr(6)) * 1024;
  }
  return m;
}

}  // namespace

std::array<double, 3> load_averages() {
  double load[3] = {-1, -1, -1};
  const int n = ::getloadavg(load, 3);
  for (int i = n < 0 ? 0 : n; i < 3; i++) load[i] = -1;
  return {load[0], load[1], load[2]};
}

double load_average_1m() {
  return load_averages()[0];
}

double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
  }
  return "unknown";
}

ProcessMemory read_process_memory(pid_t pid) {
  return read_status("/proc/" + std::to_string(pid) + "/status");
}

ProcessMemory own_process_memory() {
  return read_status("/proc/self/status");
}

}  // namespace stoa
