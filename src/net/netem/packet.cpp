#include "net/netem/packet.h"

#include <arpa/inet.h>

#include "core/error.h"

namespace stoa::net::netem {
namespace {

uint16_t get16(const Packet& p, size_t at) {
  return static_cast<uint16_t>((p[at] << 8) | p[at + 1]);
}
uint32_t get32(const Packet& p, size_t at) {
  return (uint32_t{get16(p, at)} << 16) | get16(p, at + 2);
}
void put16(Packet& p, size_t at, uint16_t v) {
  p[at] = static_cast<uint8_t>(v >> 8);
  p[at + 1] = static_cast<uint8_t>(v);
}
void put32(Packet& p, size_t at, uint32_t v) {
  put16(p, at, static_cast<uint16_t>(v >> 16));
  put16(p, at + 2, static_cast<uint16_t>(v));
}

size_t header_length(const Packet& p) {
  return size_t{p[0] & 0x0fu} * 4;
}

// One's-complement sum of 16-bit words, not yet folded.
uint64_t sum_words(const Packet& p, size_t from, size_t to) {
  uint64_t sum = 0;
  size_t i = from;
  for (; i + 1 < to; i += 2) sum += get16(p, i);
  if (i < to) sum += uint64_t{p[i]} << 8;
  return sum;
}
uint16_t fold(uint64_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

bool is_echo(const Packet& p, size_t l4) {
  return p[l4] == 8 || p[l4] == 0;
}

// Where a transport's checksum sits, or 0 when the packet carries none we keep.
size_t checksum_offset(const Packet& p, size_t l4) {
  switch (p[9]) {
    case kTcp:
      return l4 + 16;
    case kUdp:
      return get16(p, l4 + 6) == 0 ? 0 : l4 + 6;  // 0: the sender sent none
    case kIcmp:
      return l4 + 2;
    default:
      return 0;
  }
}

uint64_t transport_sum(const Packet& p) {
  const size_t l4 = header_length(p);
  uint64_t sum = sum_words(p, l4, p.size());
  if (p[9] != kIcmp) {  // TCP and UDP cover a pseudo-header; ICMP does not
    sum += get16(p, 12) + get16(p, 14) + get16(p, 16) + get16(p, 18);
    sum += p[9];
    sum += p.size() - l4;
  }
  return sum;
}

void fix_checksums(Packet& p) {
  put16(p, 10, 0);
  put16(p, 10, fold(sum_words(p, 0, header_length(p))));
  const size_t at = checksum_offset(p, header_length(p));
  if (at == 0) return;
  put16(p, at, 0);
  uint16_t sum = fold(transport_sum(p));
  if (p[9] == kUdp && sum == 0) sum = 0xffff;  // UDP's 0 means "no checksum"
  put16(p, at, sum);
}

}  // namespace

std::optional<PacketView> parse_ipv4(Packet& p) {
  if (p.size() < 20 || (p[0] >> 4) != 4) return std::nullopt;
  const size_t ihl = header_length(p);
  const size_t total = get16(p, 2);
  if (ihl < 20 || total < ihl || total > p.size()) return std::nullopt;
  p.resize(total);
  PacketView v;
  v.protocol = p[9];
  v.source = get32(p, 12);
  v.destination = get32(p, 16);
  const uint16_t flags_offset = get16(p, 6);
  v.fragment = (flags_offset & 0x2000) != 0 || (flags_offset & 0x1fff) != 0;
  if (v.fragment) return v;
  const size_t l4 = ihl;
  if ((v.protocol == kTcp && total >= l4 + 20) || (v.protocol == kUdp && total >= l4 + 8)) {
    v.source_port = get16(p, l4);
    v.destination_port = get16(p, l4 + 2);
    v.has_ports = true;
  } else if (v.protocol == kIcmp && total >= l4 + 8 && is_echo(p, l4)) {
    v.source_port = v.destination_port = get16(p, l4 + 4);
    v.has_ports = true;
  }
  return v;
}

void rewrite_source(Packet& p, uint32_t ip, uint16_t port) {
  const size_t l4 = header_length(p);
  put32(p, 12, ip);
  put16(p, p[9] == kIcmp ? l4 + 4 : l4, port);
  fix_checksums(p);
}

void rewrite_destination(Packet& p, uint32_t ip, uint16_t port) {
  const size_t l4 = header_length(p);
  put32(p, 16, ip);
  put16(p, p[9] == kIcmp ? l4 + 4 : l4 + 2, port);
  fix_checksums(p);
}

uint16_t ip_header_checksum_residue(const Packet& p) {
  return fold(sum_words(p, 0, header_length(p)));
}

uint16_t transport_checksum_residue(const Packet& p) {
  if (checksum_offset(p, header_length(p)) == 0) return 0;
  return fold(transport_sum(p));
}

uint32_t parse_ip(const std::string& dotted) {
  in_addr a{};
  STOA_CHECK(::inet_pton(AF_INET, dotted.c_str(), &a) == 1, ErrorKind::kInvalidArgument,
             "not an IPv4 address: '", dotted, "'");
  return ntohl(a.s_addr);
}

std::string format_ip(uint32_t ip) {
  in_addr a{};
  a.s_addr = htonl(ip);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, text, sizeof text);
  return text;
}

}  // namespace stoa::net::netem
