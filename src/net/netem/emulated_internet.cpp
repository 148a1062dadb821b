#include "net/netem/emulated_internet.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "core/error.h"
#include "core/log.h"
#include "core/process_run.h"
#include "net/netem/netns.h"

namespace stoa::net::netem {
namespace {

constexpr const char* kDevice = "netem0";
std::atomic<int> next_instance{0};

uint32_t host_public_ip(size_t i) {
  return parse_ip("10.233.0.0") | static_cast<uint32_t>((1 + i / 250) << 8) |
         static_cast<uint32_t>(2 + i % 250);
}

}  // namespace

HostLink HostLink::home(double down_mbit, double up_mbit, std::chrono::microseconds rtt,
                        std::chrono::microseconds jitter, double loss, NatKind nat) {
  HostLink l;
  l.down = LinkShape{down_mbit, rtt / 2, jitter, loss};
  l.up = LinkShape{up_mbit, rtt - rtt / 2, jitter, loss};
  l.nat = nat;
  return l;
}

EmulatedInternet::EmulatedInternet(InternetOptions options) : options_(std::move(options)) {
  STOA_CHECK(options_.hub.nat == NatKind::kNone, ErrorKind::kInvalidArgument,
             "the hub is on a public address: no NAT");
  STOA_CHECK(options_.hosts.size() <= 250 * 250, ErrorKind::kInvalidArgument, "too many hosts");
  const std::string why = why_netem_unusable();
  STOA_CHECK(why.empty(), ErrorKind::kUnsupported, why);
  remove_stale(options_.prefix);
  const std::string base =
      options_.prefix + std::to_string(::getpid()) + "-" + std::to_string(next_instance++) + "-";
  std::vector<RouterNode> router_nodes;
  try {
    hub_ = make_node(base + "hub", parse_ip(kHubIp), parse_ip(kHubIp), router_nodes, options_.hub);
    for (size_t i = 0; i < options_.hosts.size(); ++i) {
      const HostLink& link = options_.hosts[i];
      const uint32_t pub = host_public_ip(i);
      const uint32_t local = link.nat == NatKind::kNone ? pub : parse_ip(kPrivateIp);
      hosts_.push_back(make_node(base + "h" + std::to_string(i), pub, local, router_nodes, link));
    }
    router_ =
        std::make_unique<Router>(std::move(router_nodes), options_.seed, options_.nat_timeout);
  } catch (...) {
    for (const RouterNode& n : router_nodes) ::close(n.tun_fd);
    remove();
    throw;
  }
}

EmulatedInternet::~EmulatedInternet() {
  router_.reset();  // closes the TUN devices
  remove();
}

EmulatedInternet::Node EmulatedInternet::make_node(const std::string& name, uint32_t public_ip,
                                                   uint32_t local_ip,
                                                   std::vector<RouterNode>& router_nodes,
                                                   const HostLink& link) {
  ip_command("", {"netns", "add", name});
  made_.push_back(name);
  RouterNode r;
  r.tun_fd = open_tun_in_netns(name, kDevice);
  r.public_ip = public_ip;
  r.local_ip = local_ip;
  r.up = link.up;
  r.down = link.down;
  r.nat = link.nat;
  router_nodes.push_back(r);
  ip_command(name, {"link", "set", "lo", "up"});
  ip_command(name, {"addr", "add", format_ip(local_ip) + "/32", "dev", kDevice});
  // A deep TUN queue: the router thread may be off a busy machine's CPU for tens of ms, and a
  // full queue drops what the links were never asked to lose.
  ip_command(name, {"link", "set", kDevice, "txqueuelen", "10000", "up"});
  ip_command(name, {"route", "add", "default", "dev", kDevice});
  return Node{name, public_ip, local_ip};
}

void EmulatedInternet::remove() {
  for (const std::string& name : made_) delete_netns(name);
  made_.clear();
}

std::string EmulatedInternet::public_ip(size_t host) const {
  return format_ip(hosts_.at(host).public_ip);
}

std::string EmulatedInternet::local_ip(size_t host) const {
  return format_ip(hosts_.at(host).local_ip);
}

void EmulatedInternet::remove_stale(const std::string& prefix) {
  remove_stale_namespaces(prefix);
}

}  // namespace stoa::net::netem
