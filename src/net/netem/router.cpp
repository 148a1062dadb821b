#include "net/netem/router.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "core/log.h"

namespace stoa::net::netem {

Router::Router(std::vector<RouterNode> nodes, uint64_t seed, std::chrono::nanoseconds nat_timeout) {
  Rng rng(seed, 0x6e6574656dull);  // "netem"
  for (size_t i = 0; i < nodes.size(); ++i) {
    const RouterNode& c = nodes[i];
    std::optional<Nat> nat;
    if (c.nat != NatKind::kNone) nat.emplace(c.nat, c.public_ip, c.local_ip, nat_timeout);
    nodes_.push_back(Node{c, LinkShaper(c.up, rng.fork(2 * i)),
                          LinkShaper(c.down, rng.fork(2 * i + 1)), std::move(nat), 0});
    by_public_ip_[c.public_ip] = i;
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  STOA_CHECK(wake_fd_ >= 0, ErrorKind::kIo, "netem: eventfd: ", std::strerror(errno));
  thread_ = std::thread([this] { run(); });
}

Router::~Router() {
  stopping_ = true;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(wake_fd_, &one, sizeof one);
  thread_.join();
  ::close(wake_fd_);
  for (const Node& n : nodes_) ::close(n.config.tun_fd);
}

NodeCounters Router::counters(size_t node) const {
  std::lock_guard lock(mutex_);
  const Node& n = nodes_.at(node);
  NodeCounters c{n.up.counters(), n.down.counters(), {}, n.unroutable};
  if (n.nat) c.nat = n.nat->counters();
  return c;
}

void Router::run() {
  std::vector<pollfd> fds(nodes_.size() + 1);
  for (size_t i = 0; i < nodes_.size(); ++i) fds[i] = {nodes_[i].config.tun_fd, POLLIN, 0};
  fds.back() = {wake_fd_, POLLIN, 0};
  while (!stopping_) {
    timespec wait{};
    timespec* timeout = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (!queue_.empty()) {
        const auto left = std::max(queue_.front().due - Clock::now(), Clock::duration::zero());
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        wait.tv_sec = ns / 1'000'000'000;
        wait.tv_nsec = ns % 1'000'000'000;
        timeout = &wait;
      }
    }
    const int ready = ::ppoll(fds.data(), fds.size(), timeout, nullptr);
    if (ready < 0 && errno != EINTR) {
      log_error("netem", "ppoll: ", std::strerror(errno));
      return;
    }
    std::lock_guard lock(mutex_);
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; ready > 0 && i < nodes_.size(); ++i) {
      if (fds[i].revents & POLLIN) read_from(i, now);
    }
    // Everything due, in order of due time (a packet reaching the core may be due for delivery
    // at once: it goes back on the heap and comes out in its turn).
    while (!queue_.empty() && queue_.front().due <= Clock::now()) {
      std::pop_heap(queue_.begin(), queue_.end(), std::greater<>());
      Pending p = std::move(queue_.back());
      queue_.pop_back();
      if (p.at_core) {
        route(std::move(p));
      } else {
        deliver(p);
      }
    }
  }
}

// Reads every packet waiting on the node's TUN device and puts it on the node's uplink.
void Router::read_from(size_t i, Clock::time_point now) {
  Node& node = nodes_[i];
  static thread_local Packet buffer(65536);
  for (int burst = 0; burst < 256; ++burst) {
    const ssize_t n = ::read(node.config.tun_fd, buffer.data(), buffer.size());
    if (n <= 0) return;  // EAGAIN: nothing more for now
    auto packet = std::make_shared<Packet>(buffer.begin(), buffer.begin() + n);
    const auto view = parse_ipv4(*packet);
    if (!view) continue;  // IPv6 router solicitations and the like: not on this internet
    if (node.nat) {
      if (!node.nat->outbound(*packet, now)) continue;
    } else if (view->source != node.config.public_ip) {
      ++node.unroutable;
      continue;
    }
    const auto due = node.up.admit(packet->size(), now);
    if (!due) continue;
    queue_.push_back(Pending{*due, next_order_++, true, i, std::move(packet)});
    std::push_heap(queue_.begin(), queue_.end(), std::greater<>());
  }
}

void Router::route(Pending p) {
  const auto view = parse_ipv4(*p.packet);
  const auto to = view ? by_public_ip_.find(view->destination) : by_public_ip_.end();
  if (to == by_public_ip_.end()) {
    ++nodes_[p.node].unroutable;
    return;
  }
  Node& receiver = nodes_[to->second];
  if (receiver.nat && !receiver.nat->inbound(*p.packet, p.due)) return;
  const auto due = receiver.down.admit(p.packet->size(), p.due);
  if (!due) return;
  queue_.push_back(Pending{*due, next_order_++, false, to->second, std::move(p.packet)});
  std::push_heap(queue_.begin(), queue_.end(), std::greater<>());
}

void Router::deliver(const Pending& p) {
  // A full TUN queue drops the packet, as a NIC's full ring would; TCP retransmits.
  [[maybe_unused]] const ssize_t n =
      ::write(nodes_[p.node].config.tun_fd, p.packet->data(), p.packet->size());
}

}  // namespace stoa::net::netem
