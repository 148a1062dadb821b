#include "bench/swarm_links.h"

#include <unistd.h>

#include <fstream>

#include "app/fleet/fleet_link.h"
#include "core/error.h"
#include "net/netem/netns.h"

namespace stoa::bench {

using app::fleet::Command;
using app::fleet::in_netns;
using app::fleet::joined;
using app::fleet::run_quiet;

namespace {

void sh(const Command& command) {
  const int rc = run_quiet(command);
  STOA_CHECK(rc == 0, ErrorKind::kUnsupported, "bench swarm: `", joined(command), "` failed (exit ",
             rc, "): network namespaces need root and iproute2");
}

// A token bucket with a 64 KiB burst and up to 100 ms of queue: what a home router holds.
Command tbf(const std::string& dev, double mbit) {
  return {"tc",    "qdisc", "add",
          "dev",   dev,     "root",
          "tbf",   "rate",  std::to_string(mbit) + "mbit",
          "burst", "64kb",  "latency",
          "100ms"};
}

}  // namespace

SwarmLinks::SwarmLinks(int workers, const SwarmLinkRates& rates) {
  net::netem::remove_stale_namespaces(kPrefix);
  const std::string pid = std::to_string(::getpid() % 100000);
  bridge_ns_ = std::string(kPrefix) + std::to_string(::getpid()) + "-br";
  hub_dev_ = "sw" + pid + "h";
  try {
    sh({"ip", "netns", "add", bridge_ns_});
    sh(in_netns(bridge_ns_, {"ip", "link", "add", "br0", "type", "bridge"}));
    sh(in_netns(bridge_ns_, {"ip", "link", "set", "br0", "up"}));
    sh({"ip", "link", "add", hub_dev_, "type", "veth", "peer", "name", hub_dev_ + "b"});
    sh({"ip", "link", "set", hub_dev_ + "b", "netns", bridge_ns_});
    sh({"ip", "addr", "add", std::string(kHubIp) + "/16", "dev", hub_dev_});
    sh({"ip", "link", "set", hub_dev_, "up"});
    sh(in_netns(bridge_ns_, {"ip", "link", "set", hub_dev_ + "b", "master", "br0"}));
    sh(in_netns(bridge_ns_, {"ip", "link", "set", hub_dev_ + "b", "up"}));
    sh(tbf(hub_dev_, rates.hub_up_mbit));
    for (int i = 0; i < workers; ++i) {
      Worker w;
      w.netns = std::string(kPrefix) + std::to_string(::getpid()) + "-" + std::to_string(i);
      w.bridge_dev = "sw" + pid + "b" + std::to_string(i);
      w.dev = "sw" + pid + "w" + std::to_string(i);
      w.ip = "10.232." + std::to_string(1 + i / 250) + "." + std::to_string(2 + i % 250);
      sh({"ip", "netns", "add", w.netns});
      workers_.push_back(w);  // from here on remove() deletes it
      sh(in_netns(bridge_ns_,
                  {"ip", "link", "add", w.bridge_dev, "type", "veth", "peer", "name", w.dev}));
      sh(in_netns(bridge_ns_, {"ip", "link", "set", w.dev, "netns", w.netns}));
      sh(in_netns(bridge_ns_, {"ip", "link", "set", w.bridge_dev, "master", "br0"}));
      sh(in_netns(bridge_ns_, {"ip", "link", "set", w.bridge_dev, "up"}));
      sh(in_netns(bridge_ns_, tbf(w.bridge_dev, rates.down_mbit)));  // toward the worker
      sh(in_netns(w.netns, {"ip", "addr", "add", w.ip + "/16", "dev", w.dev}));
      sh(in_netns(w.netns, {"ip", "link", "set", w.dev, "up"}));
      sh(in_netns(w.netns, {"ip", "link", "set", "lo", "up"}));
      sh(in_netns(w.netns, tbf(w.dev, rates.up_mbit)));  // from the worker
    }
  } catch (...) {
    remove();
    throw;
  }
}

SwarmLinks::~SwarmLinks() {
  remove();
}

void SwarmLinks::remove() {
  for (const Worker& w : workers_) run_quiet({"ip", "netns", "del", w.netns});
  workers_.clear();
  if (!bridge_ns_.empty()) run_quiet({"ip", "netns", "del", bridge_ns_});
  if (!hub_dev_.empty()) run_quiet({"ip", "link", "del", hub_dev_});  // if not gone with it
  bridge_ns_.clear();
  hub_dev_.clear();
}

uint64_t SwarmLinks::hub_tx_bytes() const {
  std::ifstream in("/sys/class/net/" + hub_dev_ + "/statistics/tx_bytes");
  uint64_t v = 0;
  in >> v;
  return v;
}

}  // namespace stoa::bench
