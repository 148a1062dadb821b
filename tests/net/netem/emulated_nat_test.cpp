// The NAT kinds of the link emulator with real sockets: a host behind a port-restricted NAT
// gets replies and nothing unsolicited, a symmetric NAT shows each destination another port,
// a full cone lets anyone in once mapped, TCP dials out of a NAT and not into one; and the
// emulator removes every namespace it made, also when making one fails. Needs root,
// /dev/net/tun and iproute2: skips naming what is missing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/process_run.h"
#include "net/netem/emulated_internet.h"
#include "netem_sockets.h"
#include "support/error_of.h"

namespace stoa::net::netem {
namespace {

using namespace std::chrono_literals;

constexpr auto kWait = 400ms;  // far above the 2 × 10 ms RTT here
const std::string kHub = EmulatedInternet::kHubIp;

using sockets::Datagram;

enum Host : size_t { kPortRestricted, kSymmetric, kFullCone, kPublic };

InternetOptions four_hosts() {
  InternetOptions o;
  for (NatKind kind :
       {NatKind::kPortRestricted, NatKind::kSymmetric, NatKind::kFullCone, NatKind::kNone}) {
    o.hosts.push_back(HostLink::home(0, 0, 10ms, 0ms, 0, kind));
  }
  return o;
}

// What the hub sees of a datagram from `fd` to hub:port.
Datagram seen_at_hub(int hub_fd, int fd, uint16_t port) {
  sockets::send_to(fd, kHub, port, "hello");
  auto d = sockets::receive(hub_fd, kWait);
  EXPECT_TRUE(d) << "nothing reached the hub";
  return d.value_or(Datagram{});
}

struct NatFixture : ::testing::Test {
  void SetUp() override {
    const std::string why = why_netem_unusable();
    if (!why.empty()) GTEST_SKIP() << "link emulator unusable: " << why;
    net = std::make_unique<EmulatedInternet>(four_hosts());
    hub7000 = sockets::udp_in(net->hub_netns(), 7000);
    hub7001 = sockets::udp_in(net->hub_netns(), 7001);
    for (size_t h = 0; h < 4; ++h) host[h] = sockets::udp_in(net->netns(h), 5000);
  }
  void TearDown() override {
    for (int fd : {hub7000, hub7001, host[0], host[1], host[2], host[3]}) {
      if (fd >= 0) ::close(fd);
    }
  }
  std::unique_ptr<EmulatedInternet> net;
  int hub7000 = -1, hub7001 = -1;
  int host[4] = {-1, -1, -1, -1};
};

TEST_F(NatFixture, PortRestrictedAllowsRepliesAndRefusesTheUnsolicited) {
  const Datagram a = seen_at_hub(hub7000, host[kPortRestricted], 7000);
  EXPECT_EQ(a.from_ip, net->public_ip(kPortRestricted));  // not 192.168.1.2
  EXPECT_EQ(net->local_ip(kPortRestricted), EmulatedInternet::kPrivateIp);
  // Endpoint-independent mapping: the same port to another destination.
  EXPECT_EQ(seen_at_hub(hub7001, host[kPortRestricted], 7001).from_port, a.from_port);
  sockets::send_to(hub7000, a.from_ip, a.from_port, "reply");
  const auto reply = sockets::receive(host[kPortRestricted], kWait);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->bytes, "reply");
  EXPECT_EQ(reply->from_ip, kHub);
  // Unsolicited: a port of the hub it never sent from, and a stranger.
  const int hub7002 = sockets::udp_in(net->hub_netns(), 7002);
  sockets::send_to(hub7002, a.from_ip, a.from_port, "unsolicited");
  sockets::send_to(host[kPublic], a.from_ip, a.from_port, "stranger");
  EXPECT_FALSE(sockets::receive(host[kPortRestricted], kWait));
  EXPECT_EQ(net->counters(kPortRestricted).nat.refused_inbound, 2u);
  ::close(hub7002);
}

TEST_F(NatFixture, SymmetricGivesEachDestinationItsOwnPort) {
  const Datagram to7000 = seen_at_hub(hub7000, host[kSymmetric], 7000);
  const Datagram to7001 = seen_at_hub(hub7001, host[kSymmetric], 7001);
  EXPECT_EQ(to7000.from_ip, net->public_ip(kSymmetric));
  EXPECT_NE(to7000.from_port, to7001.from_port);
  // A peer that learned the hub's view of the mapping cannot use it.
  sockets::send_to(host[kPublic], to7000.from_ip, to7000.from_port, "peer");
  EXPECT_FALSE(sockets::receive(host[kSymmetric], kWait));
  sockets::send_to(hub7001, to7001.from_ip, to7001.from_port, "reply");
  EXPECT_TRUE(sockets::receive(host[kSymmetric], kWait));
}

TEST_F(NatFixture, FullConeLetsAnyoneInOnceMapped) {
  const Datagram a = seen_at_hub(hub7000, host[kFullCone], 7000);
  sockets::send_to(host[kPublic], a.from_ip, a.from_port, "peer");
  const auto got = sockets::receive(host[kFullCone], kWait);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->from_ip, net->public_ip(kPublic));
  // Before any mapping, nothing: another port of the cone.
  sockets::send_to(host[kPublic], a.from_ip, static_cast<uint16_t>(a.from_port + 100), "x");
  EXPECT_FALSE(sockets::receive(host[kFullCone], kWait));
}

TEST_F(NatFixture, TcpDialsOutOfANatButNotIntoOne) {
  const int listener_public = sockets::socket_in(net->netns(kPublic), SOCK_STREAM, "0.0.0.0", 9000);
  const int out =
      sockets::connect_from(net->netns(kPortRestricted), net->public_ip(kPublic), 9000, 3000ms);
  EXPECT_GE(out, 0) << "a NAT'd host could not dial a public one";
  const int listener_natted =
      sockets::socket_in(net->netns(kFullCone), SOCK_STREAM, "0.0.0.0", 9000);
  const int in =
      sockets::connect_from(net->netns(kPublic), net->public_ip(kFullCone), 9000, 1000ms);
  EXPECT_LT(in, 0) << "a public host dialled into a NAT with no mapping";
  // The public host itself takes connections from anyone.
  const int to_public =
      sockets::connect_from(net->hub_netns(), net->public_ip(kPublic), 9000, 3000ms);
  EXPECT_GE(to_public, 0);
  for (int fd : {listener_public, out, listener_natted, in, to_public}) {
    if (fd >= 0) ::close(fd);
  }
}

bool any_namespace_named(const std::string& prefix) {
  return run_capture({"ip", "netns", "list"}).out.find(prefix) != std::string::npos;
}

TEST(EmulatedInternetLifetime, RemovesEverythingItMadeAlsoWhenMakingFails) {
  SKIP_WITHOUT_NETEM();
  InternetOptions o = four_hosts();
  o.prefix = "stoa-netem-life-";
  {
    EmulatedInternet net(o);
    EXPECT_TRUE(any_namespace_named(o.prefix));
  }
  EXPECT_FALSE(any_namespace_named(o.prefix));
  // A namespace name `ip` refuses (a slash) fails the first `ip netns add`: nothing is left.
  o.prefix = "stoa-netem-bad/";
  EXPECT_EQ(stoa::test::error_of([&] { EmulatedInternet net(o); }).kind(), ErrorKind::kUnsupported);
  EXPECT_FALSE(any_namespace_named("stoa-netem-bad"));
  // A bad link on the last host fails after every namespace and TUN device was made.
  o.prefix = "stoa-netem-late-";
  o.hosts.back().up.rate_mbit = -1;
  EXPECT_EQ(stoa::test::error_of([&] { EmulatedInternet net(o); }).kind(),
            ErrorKind::kInvalidArgument);
  EXPECT_FALSE(any_namespace_named(o.prefix));
  InternetOptions natted_hub;
  natted_hub.hub.nat = NatKind::kFullCone;
  EXPECT_EQ(stoa::test::error_of([&] { EmulatedInternet net(natted_hub); }).kind(),
            ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace stoa::net::netem
