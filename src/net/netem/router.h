// The link emulator's router: one thread that reads IP packets from each node's TUN device and
// writes them to the node they are for, after the sender's uplink, the sender's NAT (outbound),
// the receiver's NAT (inbound) and the receiver's downlink had their say:
//
//   node A ─tun→ [A's NAT out] → A's up-link ─→ core: route by public address
//        → [B's NAT in: refuse?] → B's down-link ─→ tun→ node B
//
// Packets wait in one time-ordered queue (per-link FIFO order is the shapers' doing); the thread
// sleeps in ppoll until the next packet is due or a TUN device has one to read.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/netem/link_shaper.h"
#include "net/netem/nat.h"

namespace stoa::net::netem {

struct RouterNode {
  int tun_fd = -1;         // owned by the router from here on
  uint32_t public_ip = 0;  // the address the internet routes to it by
  uint32_t local_ip = 0;   // its own address (= public_ip without a NAT)
  LinkShape up, down;
  NatKind nat = NatKind::kNone;
};

struct NodeCounters {
  LinkCounters up, down;
  NatCounters nat;
  uint64_t unroutable = 0;  // to an address no node has, or a spoofed source
};

class Router {
 public:
  Router(std::vector<RouterNode> nodes, uint64_t seed, std::chrono::nanoseconds nat_timeout);
  ~Router();  // stops the thread, closes the TUN fds
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  NodeCounters counters(size_t node) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Node {
    RouterNode config;
    LinkShaper up, down;
    std::optional<Nat> nat;
    uint64_t unroutable = 0;
  };
  struct Pending {
    Clock::time_point due;
    uint64_t order;
    bool at_core;  // crossed the sender's uplink, not yet routed
    size_t node;   // the sender (at_core) or the receiver
    std::shared_ptr<Packet> packet;
    bool operator>(const Pending& o) const { return due != o.due ? due > o.due : order > o.order; }
  };

  void run();
  void read_from(size_t node, Clock::time_point now);
  void route(Pending p);
  void deliver(const Pending& p);

  std::vector<Node> nodes_;
  std::unordered_map<uint32_t, size_t> by_public_ip_;
  std::vector<Pending> queue_;  // a min-heap on `due`
  uint64_t next_order_ = 0;
  mutable std::mutex mutex_;  // nodes_' shapers and NATs: the thread, and counters()
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace stoa::net::netem
