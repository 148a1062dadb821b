// A home router's NAT for one host behind it, of the kinds RFC 4787 tells apart: how a mapping
// (internal port → external port on the router's public address) is chosen, and which inbound
// packets a mapping lets through (its filtering).
//
//   kind              mapping                                  inbound allowed from
//   full cone         one per internal port                    anyone
//   restricted cone   one per internal port                    an address the host sent to
//   port-restricted   one per internal port                    an address:port the host sent to
//   symmetric         one per internal port and destination    the address:port it was made for
//
// TCP, UDP and ICMP echo (by its identifier) are translated; any other packet from the host, a
// fragment or an inbound packet with no mapping is dropped (counted). A mapping lives while the
// host sends through it: it expires `timeout` after its last outbound packet (inbound packets do
// not refresh it, RFC 4787 REQ-6). No hairpinning: there is one host behind each NAT.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "net/netem/packet.h"

namespace stoa::net::netem {

enum class NatKind { kNone, kFullCone, kRestrictedCone, kPortRestricted, kSymmetric };

std::string nat_kind_name(NatKind kind);
NatKind parse_nat_kind(
    const std::string& name);  // "none", "full-cone", ...; throws kInvalidArgument

struct NatCounters {
  uint64_t mappings_made = 0;
  uint64_t refused_inbound = 0;  // no mapping, or the filter said no
  uint64_t untranslatable = 0;   // a protocol or fragment the NAT does not carry
};

class Nat {
 public:
  using Clock = std::chrono::steady_clock;

  Nat(NatKind kind, uint32_t public_ip, uint32_t private_ip, std::chrono::nanoseconds timeout,
      uint16_t first_port = 20000);

  // A packet from the host to the internet: rewritten to leave from the public address;
  // false when it is dropped.
  bool outbound(Packet& packet, Clock::time_point now);
  // A packet from the internet to the public address: rewritten to the host; false when the NAT
  // refuses it.
  bool inbound(Packet& packet, Clock::time_point now);

  NatKind kind() const { return kind_; }
  size_t mappings() const { return by_external_.size(); }
  const NatCounters& counters() const { return counters_; }

 private:
  struct Remote {
    uint32_t ip;
    uint16_t port;
    auto operator<=>(const Remote&) const = default;
  };
  // What a mapping is chosen by: the internal port, and for a symmetric NAT the destination.
  struct Key {
    uint8_t protocol;
    uint16_t internal_port;
    Remote destination;
    auto operator<=>(const Key&) const = default;
  };
  struct Mapping {
    Key key;
    uint16_t external_port;
    std::set<Remote> contacted;  // for filtering
    Clock::time_point last_outbound;
  };
  using External = std::pair<uint8_t, uint16_t>;  // protocol, external port

  bool expired(const Mapping& m, Clock::time_point now) const {
    return now - m.last_outbound > timeout_;
  }
  void forget(std::map<External, Mapping>::iterator it);
  void sweep(Clock::time_point now);
  uint16_t free_port(uint8_t protocol);
  bool allows(const Mapping& m, Remote from) const;

  NatKind kind_;
  uint32_t public_ip_, private_ip_;
  std::chrono::nanoseconds timeout_;
  uint16_t first_port_, next_port_;
  std::map<Key, uint16_t> by_key_;
  std::map<External, Mapping> by_external_;
  NatCounters counters_;
};

}  // namespace stoa::net::netem
