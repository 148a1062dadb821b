// IPv4 packets as the link emulator's router reads them from a TUN device: the fields it routes
// and translates by (addresses, protocol, TCP/UDP ports, an ICMP echo's identifier) and the
// rewrites a NAT makes, with the checksums made whole again. Nothing else of IP is interpreted.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stoa::net::netem {

using Packet = std::vector<uint8_t>;

inline constexpr uint8_t kIcmp = 1;
inline constexpr uint8_t kTcp = 6;
inline constexpr uint8_t kUdp = 17;

struct PacketView {
  uint8_t protocol = 0;
  uint32_t source = 0, destination = 0;  // host byte order
  // TCP/UDP ports; for an ICMP echo request or reply both are its identifier (what a NAT maps
  // by). `has_ports` is false for every other packet.
  uint16_t source_port = 0, destination_port = 0;
  bool has_ports = false;
  bool fragment = false;  // not the whole datagram (more fragments, or an offset)
};

// The view of a well-formed IPv4 packet, nullopt for anything else (IPv6, truncated, a header
// length or total length that does not fit). Trims the vector to the IP total length.
std::optional<PacketView> parse_ipv4(Packet& packet);

// Rewrite the source (destination) address and port of a packet parse_ipv4 accepted with
// has_ports, and make the IP and TCP/UDP/ICMP checksums whole again.
void rewrite_source(Packet& packet, uint32_t ip, uint16_t port);
void rewrite_destination(Packet& packet, uint32_t ip, uint16_t port);

// The Internet checksum (RFC 1071) of a packet's IP header, and of its TCP/UDP segment with the
// pseudo-header or its ICMP message: 0 when the packet's own checksums are right.
uint16_t ip_header_checksum_residue(const Packet& packet);
uint16_t transport_checksum_residue(const Packet& packet);

uint32_t parse_ip(const std::string& dotted);  // throws kInvalidArgument
std::string format_ip(uint32_t ip);

}  // namespace stoa::net::netem
