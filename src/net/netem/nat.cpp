#include "net/netem/nat.h"

#include "core/error.h"

namespace stoa::net::netem {

std::string nat_kind_name(NatKind kind) {
  switch (kind) {
    case NatKind::kNone:
      return "none";
    case NatKind::kFullCone:
      return "full-cone";
    case NatKind::kRestrictedCone:
      return "restricted-cone";
    case NatKind::kPortRestricted:
      return "port-restricted";
    case NatKind::kSymmetric:
      return "symmetric";
  }
  return "?";
}

NatKind parse_nat_kind(const std::string& name) {
  for (NatKind k : {NatKind::kNone, NatKind::kFullCone, NatKind::kRestrictedCone,
                    NatKind::kPortRestricted, NatKind::kSymmetric}) {
    if (nat_kind_name(k) == name) return k;
  }
  fail(ErrorKind::kInvalidArgument, "unknown NAT kind '", name,
       "' (none, full-cone, restricted-cone, port-restricted, symmetric)");
}

Nat::Nat(NatKind kind, uint32_t public_ip, uint32_t private_ip, std::chrono::nanoseconds timeout,
         uint16_t first_port)
    : kind_(kind),
      public_ip_(public_ip),
      private_ip_(private_ip),
      timeout_(timeout),
      first_port_(first_port),
      next_port_(first_port) {
  STOA_CHECK(kind != NatKind::kNone, ErrorKind::kInvalidArgument, "a Nat of kind none");
  STOA_CHECK(first_port >= 1024, ErrorKind::kInvalidArgument, "NAT ports from ", first_port);
}

bool Nat::outbound(Packet& packet, Clock::time_point now) {
  const auto v = parse_ipv4(packet);
  if (!v || !v->has_ports || v->source != private_ip_) {
    ++counters_.untranslatable;
    return false;
  }
  const Remote destination{v->destination, v->destination_port};
  Key key{v->protocol, v->source_port, Remote{0, 0}};
  if (kind_ == NatKind::kSymmetric) key.destination = destination;
  auto known = by_key_.find(key);
  if (known != by_key_.end()) {
    auto it = by_external_.find({v->protocol, known->second});
    if (expired(it->second, now)) forget(it), known = by_key_.end();
  }
  uint16_t external_port = 0;
  if (known == by_key_.end()) {
    sweep(now);
    external_port = free_port(v->protocol);
    if (external_port == 0) {  // every port in use: the router drops, as a full table does
      ++counters_.untranslatable;
      return false;
    }
    by_key_[key] = external_port;
    by_external_[{v->protocol, external_port}] = Mapping{key, external_port, {}, now};
    ++counters_.mappings_made;
  } else {
    external_port = known->second;
  }
  Mapping& m = by_external_.at({v->protocol, external_port});
  m.last_outbound = now;
  m.contacted.insert(destination);
  rewrite_source(packet, public_ip_, external_port);
  return true;
}

bool Nat::inbound(Packet& packet, Clock::time_point now) {
  const auto v = parse_ipv4(packet);
  if (!v || !v->has_ports || v->destination != public_ip_) {
    ++counters_.untranslatable;
    return false;
  }
  auto it = by_external_.find({v->protocol, v->destination_port});
  if (it != by_external_.end() && expired(it->second, now)) {
    forget(it);
    it = by_external_.end();
  }
  if (it == by_external_.end() || !allows(it->second, Remote{v->source, v->source_port})) {
    ++counters_.refused_inbound;
    return false;
  }
  rewrite_destination(packet, private_ip_, it->second.key.internal_port);
  return true;
}

bool Nat::allows(const Mapping& m, Remote from) const {
  switch (kind_) {
    case NatKind::kFullCone:
      return true;
    case NatKind::kRestrictedCone:
      for (const Remote& r : m.contacted) {
        if (r.ip == from.ip) return true;
      }
      return false;
    default:
      return m.contacted.count(from) > 0;  // port-restricted and symmetric
  }
}

void Nat::forget(std::map<External, Mapping>::iterator it) {
  by_key_.erase(it->second.key);
  by_external_.erase(it);
}

void Nat::sweep(Clock::time_point now) {
  for (auto it = by_external_.begin(); it != by_external_.end();) {
    auto next = std::next(it);
    if (expired(it->second, now)) forget(it);
    it = next;
  }
}

// Ports are handed out in order, as most home routers do (a symmetric NAT's next port can be
// guessed: what port-prediction traversal relies on); 0 when all are taken.
uint16_t Nat::free_port(uint8_t protocol) {
  const int span = 65536 - first_port_;
  for (int tried = 0; tried < span; ++tried) {
    const uint16_t port = next_port_;
    next_port_ = next_port_ == 65535 ? first_port_ : static_cast<uint16_t>(next_port_ + 1);
    if (!by_external_.contains({protocol, port})) return port;
  }
  return 0;
}

}  // namespace stoa::net::netem
