// Peak memory of one operation, measured in a forked child: the child runs `prepare`, resets its
// high-water mark (/proc/self/clear_refs), runs `body` and reports VmHWM - VmRSS at the start, so
// the figure is what the body itself added (memory the parent held before the fork is shared and
// does not count). The body may also report a few figures of its own (timings, sizes).
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <string>

namespace stoa::testing {

inline int64_t proc_status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::strlen(field) + 1));
  return -1;
}

struct ChildPeak {
  int64_t growth = -1;  // bytes; -1 when the body threw or the child failed
  std::array<double, 8> figures{};
};

inline ChildPeak child_peak(const std::function<void()>& prepare,
                            const std::function<void(std::array<double, 8>&)>& body) {
  ChildPeak result;
  int fds[2];
  if (::pipe(fds) != 0) return result;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ChildPeak out;
    try {
      prepare();
      std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM back to the current RSS
      const int64_t start = proc_status_kib("VmRSS:");
      body(out.figures);
      out.growth = (proc_status_kib("VmHWM:") - start) * 1024;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    (void)!::write(fds[1], &out, sizeof(out));
    std::_Exit(0);
  }
  ::close(fds[1]);
  if (::read(fds[0], &result, sizeof(result)) != sizeof(result)) result = ChildPeak{};
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return result;
}

}  // namespace stoa::testing
