// The internet in a box: a hub on a public address and N hosts, each in a network namespace of
// its own with its own access link (rate, delay and jitter each way, loss) and, if asked, behind
// a home NAT of a chosen kind (nat.h). One user-space router (router.h) joins them over TUN
// devices: this kernel has no `netem`, and `tbf` shapes only the rate.
//
//   namespace <prefix>hub        10.233.0.1                 ─ tun ─┐
//   namespace <prefix>h<i>       10.233.<1+i/250>.<2+i%250> ─ tun ─┼─ router (this process)
//   namespace <prefix>h<j> (NAT) 192.168.1.2 ─ tun ─ NAT → public 10.233.x.y ─┘
//
// Every host reaches every public address; a host behind NAT is reached only as its NAT allows.
// The delay between two nodes is the sum of their links' delays (a link's `delay` is one way
// and applies in each direction it is given for: `home()` splits an RTT to the core in two).
// Processes go into a namespace with ProcessOptions::netns (core/process.h), sockets of this
// process with run_in_netns (netns.h). Needs root, /dev/net/tun and iproute2
// (why_netem_unusable() says what is missing). The host's own interfaces, `lo` included, are
// never touched; everything made is removed by the destructor, namespaces left by a process
// killed -9 at the next start (their names carry its pid).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/netem/link_shaper.h"
#include "net/netem/nat.h"
#include "net/netem/router.h"

namespace stoa::net::netem {

struct HostLink {
  LinkShape up, down;  // from the host, to the host
  NatKind nat = NatKind::kNone;

  // A home line: rates each way, `rtt` to the core split into two one-way delays, `jitter` on
  // each, the same loss each way.
  static HostLink home(double down_mbit, double up_mbit, std::chrono::microseconds rtt,
                       std::chrono::microseconds jitter = {}, double loss = 0,
                       NatKind nat = NatKind::kNone);
};

struct InternetOptions {
  HostLink hub;  // its `nat` must be kNone: the hub is public
  std::vector<HostLink> hosts;
  uint64_t seed = 1;  // loss and jitter draws
  std::chrono::nanoseconds nat_timeout = std::chrono::seconds(120);
  std::string prefix = "stoa-netem-";  // namespaces are <prefix><pid>-<instance>-hub / -h<i>
};

class EmulatedInternet {
 public:
  static constexpr const char* kHubIp = "10.233.0.1";
  static constexpr const char* kPrivateIp = "192.168.1.2";  // every NAT'd host's own address

  // Throws kUnsupported naming what failed (root, TUN, iproute2); whatever was made is removed.
  explicit EmulatedInternet(InternetOptions options);
  ~EmulatedInternet();
  EmulatedInternet(const EmulatedInternet&) = delete;
  EmulatedInternet& operator=(const EmulatedInternet&) = delete;

  size_t hosts() const { return hosts_.size(); }
  const std::string& hub_netns() const { return hub_.netns; }
  const std::string& netns(size_t host) const { return hosts_.at(host).netns; }
  std::string public_ip(size_t host) const;  // what others see (its NAT's address behind one)
  std::string local_ip(size_t host) const;   // what the host has (kPrivateIp behind a NAT)
  NatKind nat(size_t host) const { return options_.hosts.at(host).nat; }

  NodeCounters hub_counters() const { return router_->counters(0); }
  NodeCounters counters(size_t host) const { return router_->counters(host + 1); }

  // Removes namespaces <prefix><pid>-... whose process is gone.
  static void remove_stale(const std::string& prefix);

 private:
  struct Node {
    std::string netns;
    uint32_t public_ip = 0, local_ip = 0;
  };
  Node make_node(const std::string& name, uint32_t public_ip, uint32_t local_ip,
                 std::vector<RouterNode>& router_nodes, const HostLink& link);
  void remove();

  InternetOptions options_;
  Node hub_;
  std::vector<Node> hosts_;
  std::vector<std::string> made_;  // namespaces to delete
  std::unique_ptr<Router> router_;
};

}  // namespace stoa::net::netem
