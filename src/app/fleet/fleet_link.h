// The emulated home links of `stoa bench fleet`: one network namespace per worker, joined to the
// bench's namespace by a veth pair, with a `tbf` token bucket on both ends (the rate, each way).
// The latency is added by a LinkProxy (link_proxy.h) listening on the host end of each
// veth: `netem` is not available in the sandbox this was built in.
//
//   root namespace                         namespace stoa-fleet-<pid>-<i>
//   hub 127.0.0.1:P ← proxy 10.231.i.1:Q ──veth (tbf)── 10.231.i.2  stoa work --hub 10.231.i.1:Q
//
// Needs root (CAP_NET_ADMIN) and iproute2. Everything is removed by the destructor; deleting a
// namespace deletes its veth pair. Namespaces left by a bench that was killed -9 are removed at
// the next start (their name carries the bench's pid).
// Header-only: the cli's CMake builds only cmd_*.cpp, and this is not a command.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/process_run.h"
#include "net/netem/netns.h"

namespace stoa::app::fleet {

using Command = std::vector<std::string>;

// The command's exit code (-1 when it was killed), its output discarded.
inline int run_quiet(const Command& command) {
  ProcessOptions quiet;
  quiet.out = OutputTarget::discard();
  quiet.err = OutputTarget::discard();
  const RunResult r = run_process(command, quiet);
  return r.status.signaled() ? -1 : r.status.code;
}

inline std::string joined(const Command& command) {
  std::string s;
  for (const auto& a : command) s += (s.empty() ? "" : " ") + a;
  return s;
}

// `cmd...` run inside network namespace `netns` (ip netns exec).
inline Command in_netns(const std::string& netns, Command cmd) {
  cmd.insert(cmd.begin(), {"ip", "netns", "exec", netns});
  return cmd;
}

class HomeLinks {
 public:
  static constexpr const char* kPrefix = "stoa-fleet-";

  // Removes namespaces of earlier benches whose process is gone.
  static void remove_stale() { net::netem::remove_stale_namespaces(kPrefix); }

  // Creates `n` links of `rate_mbit` each way. Throws kUnsupported naming the failed command
  // (no permission, no iproute2, ...); whatever was created is removed first.
  HomeLinks(int n, double rate_mbit) {
    remove_stale();
    const long pid = static_cast<long>(::getpid());
    try {
      for (int i = 0; i < n; ++i) {
        Link l;
        l.netns = kPrefix + std::to_string(pid) + "-" + std::to_string(i);
        l.host_dev = "sf" + std::to_string(pid % 100000) + "h" + std::to_string(i);
        l.peer_dev = "sf" + std::to_string(pid % 100000) + "w" + std::to_string(i);
        l.host_ip = "10.231." + std::to_string(i + 1) + ".1";
        l.worker_ip = "10.231." + std::to_string(i + 1) + ".2";
        sh({"ip", "netns", "add", l.netns});
        links_.push_back(l);  // from here on the destructor removes it
        // Rate with a burst of 64 KiB and up to 100 ms of queue: what a home router holds.
        const Command tbf = {"root",  "tbf",  "rate",    std::to_string(rate_mbit) + "mbit",
                             "burst", "64kb", "latency", "100ms"};
        auto qdisc = [&](const std::string& dev) {
          Command c = {"tc", "qdisc", "add", "dev", dev};
          c.insert(c.end(), tbf.begin(), tbf.end());
          return c;
        };
        sh({"ip", "link", "add", l.host_dev, "type", "veth", "peer", "name", l.peer_dev});
        sh({"ip", "link", "set", l.peer_dev, "netns", l.netns});
        sh({"ip", "addr", "add", l.host_ip + "/24", "dev", l.host_dev});
        sh({"ip", "link", "set", l.host_dev, "up"});
        sh(in_netns(l.netns, {"ip", "addr", "add", l.worker_ip + "/24", "dev", l.peer_dev}));
        sh(in_netns(l.netns, {"ip", "link", "set", l.peer_dev, "up"}));
        sh(in_netns(l.netns, {"ip", "link", "set", "lo", "up"}));
        sh(qdisc(l.host_dev));                     // down: toward the worker
        sh(in_netns(l.netns, qdisc(l.peer_dev)));  // up: from the worker
      }
    } catch (...) {
      remove();
      throw;
    }
  }
  ~HomeLinks() { remove(); }
  HomeLinks(const HomeLinks&) = delete;
  HomeLinks& operator=(const HomeLinks&) = delete;

  struct Link {
    std::string netns, host_dev, peer_dev, host_ip, worker_ip;
  };
  const std::vector<Link>& links() const { return links_; }

  // Bytes through the host end of link i (Ethernet frames, headers included): tx = down
  // (toward the worker), rx = up.
  static uint64_t dev_counter(const std::string& dev, const char* which) {
    std::ifstream in("/sys/class/net/" + dev + "/statistics/" + which);
    uint64_t v = 0;
    in >> v;
    return v;
  }

  void remove() {
    for (const Link& l : links_) run_quiet({"ip", "netns", "del", l.netns});
    for (const Link& l : links_) run_quiet({"ip", "link", "del", l.host_dev});  // if not gone
    links_.clear();
  }

 private:
  static void sh(const Command& command) {
    const int rc = run_quiet(command);
    STOA_CHECK(rc == 0, ErrorKind::kUnsupported, "bench fleet: `", joined(command),
               "` failed (exit ", rc, "): network namespaces need root and iproute2");
  }
  std::vector<Link> links_;
};

}  // namespace stoa::app::fleet
