// Nat and the packet rewrites on packets built here (no namespaces, no root): each kind's
// mapping and filtering as RFC 4787 names them, checksums whole after every rewrite, expiry,
// and what a NAT refuses to carry.
#include <gtest/gtest.h>

#include <chrono>

#include "net/netem/nat.h"
#include "net/netem/packet.h"
#include "support/error_of.h"

namespace stoa::net::netem {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const uint32_t kPrivate = parse_ip("192.168.1.2");
const uint32_t kPublic = parse_ip("10.233.1.2");
const uint32_t kHub = parse_ip("10.233.0.1");
const uint32_t kPeer = parse_ip("10.233.1.9");

// An IPv4 packet of `protocol` with a small payload; its checksums made right by a rewrite.
Packet make_packet(uint8_t protocol, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport) {
  const size_t l4 = protocol == kTcp ? 20 : 8;
  Packet p(20 + l4 + 5, 0);
  p[0] = 0x45;
  p[2] = static_cast<uint8_t>(p.size() >> 8);
  p[3] = static_cast<uint8_t>(p.size());
  p[8] = 64;
  p[9] = protocol;
  if (protocol == kUdp) {
    p[24] = static_cast<uint8_t>((l4 + 5) >> 8);
    p[25] = static_cast<uint8_t>(l4 + 5);
    p[26] = 1;  // a non-zero checksum: the sender computed one
  }
  if (protocol == kTcp) p[32] = 0x50;  // data offset 5
  if (protocol == kIcmp) p[20] = 8;    // echo request
  for (size_t i = 20 + l4; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i * 7);
  rewrite_destination(p, dst, dport);
  rewrite_source(p, src, sport);
  return p;
}

Packet udp(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport) {
  return make_packet(kUdp, src, sport, dst, dport);
}

PacketView view(Packet p) {
  return *parse_ipv4(p);
}

void expect_checksums_whole(const Packet& p) {
  EXPECT_EQ(ip_header_checksum_residue(p), 0);
  EXPECT_EQ(transport_checksum_residue(p), 0);
}

TEST(NetemPacket, ParsesAndRewritesWithWholeChecksums) {
  for (uint8_t protocol : {kUdp, kTcp, kIcmp}) {
    Packet p = make_packet(protocol, kPrivate, 5000, kHub, 7000);
    const PacketView v = view(p);
    EXPECT_EQ(v.protocol, protocol);
    EXPECT_EQ(v.source, kPrivate);
    EXPECT_EQ(v.destination, kHub);
    EXPECT_TRUE(v.has_ports);
    if (protocol != kIcmp) {
      EXPECT_EQ(v.destination_port, 7000);
    }
    expect_checksums_whole(p);
    rewrite_source(p, kPublic, 20001);
    expect_checksums_whole(p);
    EXPECT_EQ(view(p).source_port, 20001);
    p[30] ^= 0xff;  // a payload byte the checksum no longer matches
    EXPECT_NE(transport_checksum_residue(p), 0);
  }
  Packet short_packet(10, 0x45);
  EXPECT_FALSE(parse_ipv4(short_packet));
  Packet v6 = udp(kPrivate, 1, kHub, 2);
  v6[0] = 0x60;
  EXPECT_FALSE(parse_ipv4(v6));
  EXPECT_EQ(format_ip(parse_ip("10.233.0.1")), "10.233.0.1");
  EXPECT_EQ(test::error_of([] { parse_ip("10.233.0"); }).kind(), ErrorKind::kInvalidArgument);
}

struct Translated {
  bool passed;
  PacketView view;
};

Translated out(Nat& nat, uint16_t sport, uint32_t dst, uint16_t dport, Clock::time_point t) {
  Packet p = udp(kPrivate, sport, dst, dport);
  const bool ok = nat.outbound(p, t);
  if (ok) expect_checksums_whole(p);
  return {ok, view(p)};
}

Translated in(Nat& nat, uint32_t src, uint16_t sport, uint16_t to_port, Clock::time_point t) {
  Packet p = udp(src, sport, kPublic, to_port);
  const bool ok = nat.inbound(p, t);
  if (ok) expect_checksums_whole(p);
  return {ok, view(p)};
}

TEST(NetemNat, PortRestrictedLetsRepliesInAndRefusesStrangers) {
  Nat nat(NatKind::kPortRestricted, kPublic, kPrivate, 60s);
  const auto t = Clock::now();
  const Translated a = out(nat, 5000, kHub, 7000, t);
  ASSERT_TRUE(a.passed);
  EXPECT_EQ(a.view.source, kPublic);
  const uint16_t mapped = a.view.source_port;
  // The same internal port to another destination keeps its mapping (endpoint-independent).
  EXPECT_EQ(out(nat, 5000, kPeer, 9000, t).view.source_port, mapped);
  const Translated reply = in(nat, kHub, 7000, mapped, t);
  ASSERT_TRUE(reply.passed);
  EXPECT_EQ(reply.view.destination, kPrivate);
  EXPECT_EQ(reply.view.destination_port, 5000);
  EXPECT_FALSE(in(nat, kHub, 7001, mapped, t).passed);  // another port of the same host
  EXPECT_FALSE(in(nat, parse_ip("10.233.1.77"), 7000, mapped, t).passed);          // a stranger
  EXPECT_FALSE(in(nat, kHub, 7000, static_cast<uint16_t>(mapped + 1), t).passed);  // no mapping
  EXPECT_EQ(nat.counters().refused_inbound, 3u);
}

TEST(NetemNat, SymmetricMapsEachDestinationApart) {
  Nat nat(NatKind::kSymmetric, kPublic, kPrivate, 60s);
  const auto t = Clock::now();
  const uint16_t to_hub = out(nat, 5000, kHub, 7000, t).view.source_port;
  const uint16_t to_hub_other_port = out(nat, 5000, kHub, 7001, t).view.source_port;
  const uint16_t to_peer = out(nat, 5000, kPeer, 7000, t).view.source_port;
  EXPECT_NE(to_hub, to_hub_other_port);
  EXPECT_NE(to_hub, to_peer);
  EXPECT_EQ(out(nat, 5000, kHub, 7000, t).view.source_port, to_hub);  // kept while used
  EXPECT_TRUE(in(nat, kHub, 7000, to_hub, t).passed);
  EXPECT_FALSE(in(nat, kPeer, 7000, to_hub, t).passed);  // the peer's reply must use its own
  EXPECT_TRUE(in(nat, kPeer, 7000, to_peer, t).passed);
  EXPECT_EQ(nat.mappings(), 3u);
}

TEST(NetemNat, ConesFilterByNothingOrByAddress) {
  const auto t = Clock::now();
  Nat full(NatKind::kFullCone, kPublic, kPrivate, 60s);
  const uint16_t f = out(full, 5000, kHub, 7000, t).view.source_port;
  EXPECT_TRUE(in(full, parse_ip("10.233.1.77"), 1234, f, t).passed);  // anyone, once mapped
  Nat restricted(NatKind::kRestrictedCone, kPublic, kPrivate, 60s);
  const uint16_t r = out(restricted, 5000, kHub, 7000, t).view.source_port;
  EXPECT_TRUE(in(restricted, kHub, 9999, r, t).passed);  // any port of an address it sent to
  EXPECT_FALSE(in(restricted, kPeer, 7000, r, t).passed);
}

TEST(NetemNat, MappingsExpireWithoutOutboundTraffic) {
  Nat nat(NatKind::kPortRestricted, kPublic, kPrivate, 10s);
  const auto t = Clock::now();
  const uint16_t mapped = out(nat, 5000, kHub, 7000, t).view.source_port;
  EXPECT_TRUE(in(nat, kHub, 7000, mapped, t + 9s).passed);
  EXPECT_FALSE(in(nat, kHub, 7000, mapped, t + 11s).passed);  // inbound does not refresh it
  EXPECT_EQ(nat.mappings(), 0u);
  const uint16_t again = out(nat, 5000, kHub, 7000, t + 12s).view.source_port;
  EXPECT_NE(again, mapped);  // a new mapping, a new port
}

TEST(NetemNat, DropsWhatItCannotTranslate) {
  Nat nat(NatKind::kPortRestricted, kPublic, kPrivate, 60s);
  const auto t = Clock::now();
  Packet gre = udp(kPrivate, 1, kHub, 2);
  gre[9] = 47;
  EXPECT_FALSE(nat.outbound(gre, t));
  Packet fragment = udp(kPrivate, 1, kHub, 2);
  fragment[6] = 0x20;  // more fragments
  EXPECT_FALSE(nat.outbound(fragment, t));
  Packet spoofed = udp(parse_ip("192.168.1.3"), 1, kHub, 2);
  EXPECT_FALSE(nat.outbound(spoofed, t));
  EXPECT_EQ(nat.counters().untranslatable, 3u);
  EXPECT_EQ(test::error_of([] { Nat(NatKind::kNone, kPublic, kPrivate, 1s); }).kind(),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(parse_nat_kind("symmetric"), NatKind::kSymmetric);
  EXPECT_EQ(test::error_of([] { parse_nat_kind("cone"); }).kind(), ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace stoa::net::netem
