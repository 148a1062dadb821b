// The emulated internet of `stoa bench swarm`: one hub uplink and N home links on a switch, so
// workers reach each other as well as the hub. A bridge lives in a namespace of its own; the hub
// (the bench process, in the root namespace) joins it by a veth pair whose root end carries
// 10.232.0.1 and a `tbf` on its egress (the hub's uplink); worker i lives in namespace
// stoa-swarm-<pid>-<i> at 10.232.<1 + i/250>.<2 + i%250>, joined to the bridge by a veth pair
// with a `tbf` each way (its download and its upload).
//
//   root namespace ── sw<pid>h ═tbf(hub up)═ bridge ns [br0] ═tbf(down)═ sw<pid>w<i> ── worker i
//                                                            ═tbf(up)═
//
// Latency is not emulated: `netem` is not in this kernel, and a proxy (as `stoa bench fleet`
// uses for the hub's link) cannot sit between peers that dial each other. Needs root and
// iproute2; everything is removed by the destructor (namespaces of a bench killed -9 at the next
// start). The host's own interfaces, `lo` included, are never touched.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stoa::bench {

struct SwarmLinkRates {
  double hub_up_mbit = 50;
  double down_mbit = 50;
  double up_mbit = 10;
};

class SwarmLinks {
 public:
  static constexpr const char* kPrefix = "stoa-swarm-";
  // Throws kUnsupported naming the command that failed (no root, no iproute2, ...).
  SwarmLinks(int workers, const SwarmLinkRates& rates);
  ~SwarmLinks();
  SwarmLinks(const SwarmLinks&) = delete;
  SwarmLinks& operator=(const SwarmLinks&) = delete;

  static constexpr const char* kHubIp = "10.232.0.1";
  const std::string& netns(int worker) const { return workers_.at(worker).netns; }
  const std::string& ip(int worker) const { return workers_.at(worker).ip; }
  // Bytes the hub sent into the emulated internet (frames, headers included).
  uint64_t hub_tx_bytes() const;

 private:
  struct Worker {
    std::string netns, bridge_dev, dev, ip;
  };
  void remove();
  std::string bridge_ns_, hub_dev_;
  std::vector<Worker> workers_;
};

}  // namespace stoa::bench
