// LinkProxy against real loopback sockets: bytes arrive intact and are counted each way, each
// direction is held for the one-way delay, the rate limit bounds throughput, half-closes pass
// through, a connection is cut at exactly the bytes asked (also when the cut is lowered under
// it), and bad options are refused.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "core/error.h"
#include "net/link_proxy.h"
#include "support/error_of.h"
#include "support/loopback_socket.h"

namespace stoa::net {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// How long any wait here may take: events on a loaded machine can be slow, never this slow.
constexpr double kDeadlineMs = 60'000;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// A one-connection-at-a-time TCP server on 127.0.0.1: echoes (or only counts) what it reads and
// closes its side after the peer's EOF.
class TestServer {
 public:
  explicit TestServer(bool echo) : echo_(echo) {
    const test::LoopbackSocket listening = test::bind_loopback(8);
    fd_ = listening.fd;
    port_ = listening.port;
    thread_ = std::thread([this] { serve(); });
  }
  ~TestServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  uint64_t received() const { return received_; }
  bool saw_eof() const { return saw_eof_; }

 private:
  void serve() {
    const int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char buf[65536];
    while (true) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) {
        saw_eof_ = n == 0;
        break;
      }
      received_ += static_cast<uint64_t>(n);
      if (echo_) ::send(c, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
    }
    if (echo_) ::send(c, "bye", 3, MSG_NOSIGNAL);  // after the peer's half-close
    ::close(c);
  }
  bool echo_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<uint64_t> received_{0};
  std::atomic<bool> saw_eof_{false};
  std::thread thread_;
};

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

std::string read_exactly(int fd, size_t n) {
  std::string out;
  char buf[65536];
  while (out.size() < n) {
    const ssize_t r = ::recv(fd, buf, std::min(sizeof buf, n - out.size()), 0);
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

LinkProxyOptions options_for(int target_port) {
  LinkProxyOptions o;
  o.target_port = target_port;
  return o;
}

TEST(LinkProxy, ForwardsBytesIntactAndCountsEachWay) {
  TestServer server(/*echo=*/true);
  LinkProxy proxy(options_for(server.port()));
  const int fd = connect_to(proxy.port());
  std::string payload(1 << 20, '\0');
  std::mt19937 rng(7);
  for (char& ch : payload) ch = static_cast<char>(rng());
  std::thread writer([&] {
    ASSERT_EQ(::send(fd, payload.data(), payload.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(payload.size()));
    ::shutdown(fd, SHUT_WR);  // the half-close must reach the server through the proxy
  });
  const std::string echoed = read_exactly(fd, payload.size() + 3);
  writer.join();
  ::close(fd);
  ASSERT_EQ(echoed.size(), payload.size() + 3);
  EXPECT_TRUE(echoed.compare(0, payload.size(), payload) == 0);
  EXPECT_EQ(echoed.substr(payload.size()), "bye") << "the server saw the client's half-close";
  EXPECT_TRUE(server.saw_eof());
  proxy.stop();
  const LinkProxyCounters c = proxy.counters();
  EXPECT_EQ(c.bytes_to_target, payload.size());
  EXPECT_EQ(c.bytes_to_client, payload.size() + 3);
  EXPECT_EQ(c.connections, 1u);
  EXPECT_EQ(c.connect_failures, 0u);
}

TEST(LinkProxy, HoldsEachDirectionForTheOneWayDelay) {
  TestServer server(/*echo=*/true);
  LinkProxyOptions o = options_for(server.port());
  o.one_way_delay = 30ms;
  LinkProxy proxy(o);
  const int fd = connect_to(proxy.port());
  constexpr int kRounds = 5;
  for (int i = 0; i < kRounds; ++i) {
    const auto t0 = Clock::now();
    ASSERT_EQ(::send(fd, "x", 1, MSG_NOSIGNAL), 1);
    ASSERT_EQ(read_exactly(fd, 1), "x");
    const double rtt = ms_since(t0);
    // The delay is a lower bound the proxy guarantees; how much longer a round takes depends on
    // the machine's load, so the upper bound is only a deadline that catches a proxy holding data
    // until more arrives (a hang), not a speed.
    EXPECT_GE(rtt, 60.0) << "round " << i << ": two one-way delays of 30 ms";
    EXPECT_LT(rtt, kDeadlineMs) << "round " << i;
  }
  ::close(fd);
}

TEST(LinkProxy, DelayPipelinesInsteadOfStoppingAndWaiting) {
  // One chunk, then (half a delay later, so the proxy has surely read the first one alone) 19
  // more back to back, through a 2 s one-way delay. Pipelined, the last ones arrive 1.5 delays
  // after the start; a proxy that holds one read for the delay before reading the next cannot
  // deliver them before 2 delays. The bar between the two leaves a loaded machine 1 s of slack;
  // it is the behaviour being told apart, not a speed.
  constexpr auto kDelay = 2000ms;
  constexpr double kDelayMs = 2000;
  TestServer server(/*echo=*/false);
  LinkProxyOptions o = options_for(server.port());
  o.one_way_delay = kDelay;
  LinkProxy proxy(o);
  const int fd = connect_to(proxy.port());
  const auto t0 = Clock::now();
  ASSERT_EQ(::send(fd, "0123456789", 10, MSG_NOSIGNAL), 10);
  std::this_thread::sleep_for(kDelay / 2);
  for (int i = 1; i < 20; ++i) ASSERT_EQ(::send(fd, "0123456789", 10, MSG_NOSIGNAL), 10);
  while (server.received() < 200 && ms_since(t0) < kDeadlineMs) std::this_thread::sleep_for(1ms);
  const double took = ms_since(t0);
  EXPECT_EQ(server.received(), 200u) << "not delivered within the deadline";
  EXPECT_GE(took, 1.5 * kDelayMs);
  EXPECT_LT(took, 2 * kDelayMs) << "chunks must overlap in flight";
  ::close(fd);
}

TEST(LinkProxy, RateLimitBoundsThroughput) {
  TestServer server(/*echo=*/false);
  LinkProxyOptions o = options_for(server.port());
  o.rate_bytes_per_s = 2e6;  // 16 Mbit/s
  LinkProxy proxy(o);
  const int fd = connect_to(proxy.port());
  const std::string payload(1'000'000, 'r');
  const auto t0 = Clock::now();
  std::thread writer(
      [&] { ASSERT_EQ(::send(fd, payload.data(), payload.size(), MSG_NOSIGNAL), 1'000'000); });
  while (server.received() < payload.size() && ms_since(t0) < kDeadlineMs)
    std::this_thread::sleep_for(2ms);
  const double took = ms_since(t0);
  writer.join();
  EXPECT_EQ(server.received(), payload.size()) << "not delivered within the deadline";
  EXPECT_GE(took, 450.0) << "1 MB at 2 MB/s takes about 500 ms";
  // The proxy counts a chunk after its send() returns, which can be after the server has read it.
  for (int i = 0; i < 500 && proxy.counters().bytes_to_target < payload.size(); ++i)
    std::this_thread::sleep_for(2ms);
  EXPECT_EQ(proxy.counters().bytes_to_target, payload.size());
  ::close(fd);
}

TEST(LinkProxy, StopClosesOpenConnectionsPromptly) {
  TestServer server(/*echo=*/true);
  LinkProxyOptions o = options_for(server.port());
  o.one_way_delay = 10ms;
  LinkProxy proxy(o);
  const int fd = connect_to(proxy.port());
  ASSERT_EQ(::send(fd, "ping", 4, MSG_NOSIGNAL), 4);
  ASSERT_EQ(read_exactly(fd, 4), "ping");
  const auto t0 = Clock::now();
  proxy.stop();
  // A deadline, not a speed: stop() must not wait for the client to hang up (it never does).
  EXPECT_LT(ms_since(t0), kDeadlineMs);
  char b;
  EXPECT_LE(::recv(fd, &b, 1, 0), 0) << "the client sees its connection closed";
  ::close(fd);
  proxy.stop();  // idempotent
}

TEST(LinkProxy, ATargetThatRefusesIsCountedAndTheClientIsClosed) {
  int unused_port = 0;
  {
    TestServer probe(/*echo=*/false);
    unused_port = probe.port();
    const int fd = connect_to(probe.port());  // let the probe's accept return
    ::close(fd);
  }
  LinkProxy proxy(options_for(unused_port));
  const int fd = connect_to(proxy.port());
  char b;
  EXPECT_LE(::recv(fd, &b, 1, 0), 0);
  ::close(fd);
  for (int i = 0; i < 100 && proxy.counters().connect_failures == 0; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(proxy.counters().connect_failures, 1u);
  EXPECT_EQ(proxy.counters().connections, 0u);
}

// Reads until the proxy closes the connection; everything that arrived.
std::string read_until_closed(int fd) {
  std::string out;
  char buf[65536];
  for (ssize_t r; (r = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    out.append(buf, static_cast<size_t>(r));
  return out;
}

TEST(LinkProxy, CutsEachConnectionAtExactlyTheBytesAsked) {
  TestServer server(/*echo=*/true);
  LinkProxyOptions o = options_for(server.port());
  o.cut_after_bytes = 100'000;
  LinkProxy proxy(o);
  const int fd = connect_to(proxy.port());
  std::string sent(150'000, '\0');
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<char>(i * 7 + 3);
  std::thread writer([&] { ::send(fd, sent.data(), sent.size(), MSG_NOSIGNAL); });
  const std::string got = read_until_closed(fd);
  writer.join();
  ::close(fd);
  ASSERT_EQ(got.size(), 100'000u);
  EXPECT_EQ(got, sent.substr(0, 100'000));
  EXPECT_EQ(proxy.counters().cuts, 1u);
  EXPECT_EQ(proxy.counters().bytes_to_client, 100'000u);
}

TEST(LinkProxy, ALoweredCutClosesAConnectionAlreadyPastItBeforeMoreArrives) {
  TestServer server(/*echo=*/true);
  LinkProxy proxy(options_for(server.port()));  // no cut yet
  const int fd = connect_to(proxy.port());
  const std::string ping(1000, 'p');
  ASSERT_EQ(::send(fd, ping.data(), ping.size(), MSG_NOSIGNAL), 1000);
  ASSERT_EQ(read_exactly(fd, 1000), ping);
  proxy.set_cut_after(500);
  ::send(fd, ping.data(), ping.size(), MSG_NOSIGNAL);
  EXPECT_EQ(read_until_closed(fd), "") << "nothing more reaches a connection past the cut";
  ::close(fd);
  EXPECT_EQ(proxy.counters().cuts, 1u);
  EXPECT_EQ(proxy.counters().bytes_to_client, 1000u);
}

TEST(LinkProxy, BadOptionsAreRefusedByName) {
  LinkProxyOptions o;
  o.target_port = 0;
  const Error port_zero = stoa::test::error_of([&] { LinkProxy p(o); }, "port 0 accepted");
  EXPECT_EQ(port_zero.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(port_zero.what()).find("target port"), std::string::npos)
      << port_zero.what();
  o.target_port = 80;
  o.listen_host = "localhost-not-an-ip";
  const Error host_name =
      stoa::test::error_of([&] { LinkProxy p(o); }, "a host name accepted as an address");
  EXPECT_NE(std::string(host_name.what()).find("localhost-not-an-ip"), std::string::npos)
      << host_name.what();
  o.listen_host = "127.0.0.1";
  o.one_way_delay = std::chrono::microseconds(-1);
  EXPECT_THROW(LinkProxy p(o), Error);
}

}  // namespace
}  // namespace stoa::net
