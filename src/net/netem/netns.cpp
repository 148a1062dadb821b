#include "net/netem/netns.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "core/process_run.h"

namespace stoa::net::netem {
namespace {

// Enters the namespace on the calling thread (setns(CLONE_NEWNET) changes only this thread).
void enter_netns(const std::string& netns) {
  const std::string path = "/run/netns/" + netns;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  STOA_CHECK(fd >= 0, ErrorKind::kUnsupported, "netem: cannot open ", path, ": ",
             std::strerror(errno));
  const int rc = ::setns(fd, CLONE_NEWNET);
  const int err = errno;
  ::close(fd);
  STOA_CHECK(rc == 0, ErrorKind::kUnsupported, "netem: setns into ", netns, ": ",
             std::strerror(err));
}

}  // namespace

void run_in_netns(const std::string& netns, const std::function<void()>& fn) {
  std::exception_ptr failure;
  std::thread inside([&] {
    try {
      enter_netns(netns);
      fn();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  inside.join();
  if (failure) std::rethrow_exception(failure);
}

int open_tun_in_netns(const std::string& netns, const std::string& device) {
  STOA_CHECK(device.size() < IFNAMSIZ, ErrorKind::kInvalidArgument,
             "device name too long: ", device);
  int fd = -1;
  run_in_netns(netns, [&] {
    fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    STOA_CHECK(fd >= 0, ErrorKind::kUnsupported,
               "netem: cannot open /dev/net/tun: ", std::strerror(errno));
    ifreq request{};
    request.ifr_flags = IFF_TUN | IFF_NO_PI;
    std::memcpy(request.ifr_name, device.c_str(), device.size());
    if (::ioctl(fd, TUNSETIFF, &request) != 0) {
      const int err = errno;
      ::close(fd);
      fd = -1;
      fail(ErrorKind::kUnsupported, "netem: TUNSETIFF ", device, " in ", netns, ": ",
           std::strerror(err));
    }
  });
  return fd;
}

void ip_command(const std::string& netns, const std::vector<std::string>& args) {
  std::vector<std::string> argv;
  if (!netns.empty()) argv = {"ip", "netns", "exec", netns};
  argv.push_back("ip");
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions options;
  options.out = OutputTarget::discard();
  options.err = OutputTarget::capture();
  const RunResult r = run_process(argv, options, std::chrono::seconds(20));
  if (r.status.code == 0 && !r.status.signaled() && !r.timed_out) return;
  std::string command;
  for (const auto& a : argv) command += (command.empty() ? "" : " ") + a;
  fail(ErrorKind::kUnsupported, "netem: `", command, "` failed (exit ", r.status.code,
       "): ", r.err);
}

void delete_netns(const std::string& name) {
  ProcessOptions quiet;
  quiet.out = OutputTarget::discard();
  quiet.err = OutputTarget::discard();
  run_process({"ip", "netns", "del", name}, quiet, std::chrono::seconds(20));
}

void remove_stale_namespaces(const std::string& prefix) {
  const std::string list = run_capture({"ip", "netns", "list"}).out;
  size_t pos = 0;
  while ((pos = list.find(prefix, pos)) != std::string::npos) {
    const size_t end = list.find_first_of(" \n", pos);
    const std::string name = list.substr(pos, end - pos);
    pos = end;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      log_info("netem", "removing stale namespace ", name);
      delete_netns(name);
    }
  }
}

std::string why_netem_unusable() {
  if (::geteuid() != 0) return "the link emulator needs root (network namespaces, TUN devices)";
  const int fd = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) return std::string("cannot open /dev/net/tun: ") + std::strerror(errno);
  ::close(fd);
  ProcessOptions quiet;
  quiet.out = OutputTarget::discard();
  quiet.err = OutputTarget::discard();
  try {
    const RunResult r = run_process({"ip", "netns", "list"}, quiet, std::chrono::seconds(10));
    if (r.status.code != 0 || r.status.signaled()) return "`ip netns list` failed: iproute2?";
  } catch (const std::exception& e) {
    return std::string("cannot run `ip` (iproute2): ") + e.what();
  }
  return "";
}

}  // namespace stoa::net::netem
