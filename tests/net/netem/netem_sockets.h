// Sockets made inside an emulated host's namespace from the test process (run_in_netns), and
// the few blocking calls the link emulator's tests make with them.
#pragma once
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "net/netem/emulated_internet.h"
#include "net/netem/netns.h"

// Skips the calling test, naming what is missing, where the emulator cannot run (not root, no
// /dev/net/tun, no iproute2): one rule for every test of the emulator in namespaces.
#define SKIP_WITHOUT_NETEM()                                             \
  do {                                                                   \
    const std::string why = ::stoa::net::netem::why_netem_unusable();    \
    if (!why.empty()) GTEST_SKIP() << "link emulator unusable: " << why; \
  } while (0)

namespace stoa::net::netem::sockets {

inline sockaddr_in address(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

// A socket of `type` bound to ip:port inside `netns` (listening, for TCP).
inline int socket_in(const std::string& netns, int type, const std::string& ip, uint16_t port) {
  int fd = -1;
  run_in_netns(netns, [&] {
    fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const sockaddr_in a = address(ip, port);
    STOA_CHECK(::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0, ErrorKind::kIo,
               "bind ", ip, ":", port, " in ", netns, ": ", std::strerror(errno));
    if (type == SOCK_STREAM) ::listen(fd, 8);
  });
  return fd;
}

inline int udp_in(const std::string& netns, uint16_t port) {
  return socket_in(netns, SOCK_DGRAM, "0.0.0.0", port);
}

inline void send_to(int fd, const std::string& ip, uint16_t port, const std::string& bytes) {
  const sockaddr_in a = address(ip, port);
  ::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

struct Datagram {
  std::string from_ip;
  uint16_t from_port = 0;
  std::string bytes;
};

inline bool readable(int fd, std::chrono::milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(wait.count())) == 1;
}

inline std::optional<Datagram> receive(int fd, std::chrono::milliseconds wait) {
  if (!readable(fd, wait)) return std::nullopt;
  char buffer[2048];
  sockaddr_in from{};
  socklen_t length = sizeof from;
  const ssize_t n =
      ::recvfrom(fd, buffer, sizeof buffer, 0, reinterpret_cast<sockaddr*>(&from), &length);
  if (n < 0) return std::nullopt;
  char ip[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
  return Datagram{ip, ntohs(from.sin_port), std::string(buffer, static_cast<size_t>(n))};
}

// A TCP connection from inside `netns` to ip:port, or -1 when none is made within `wait`.
inline int connect_from(const std::string& netns, const std::string& ip, uint16_t port,
                        std::chrono::milliseconds wait) {
  int fd = -1;
  run_in_netns(netns,
               [&] { fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0); });
  const sockaddr_in a = address(ip, port);
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
  if (rc != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  int error = 0;
  socklen_t length = sizeof error;
  if (::poll(&p, 1, static_cast<int>(wait.count())) != 1 ||
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

inline double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Mbit/s of TCP payload from `from` to `to` over ~1.5 s.
inline double tcp_goodput(int from, int to) {
  std::atomic<bool> done{false};
  std::jthread sender([&] {
    std::vector<char> chunk(64 * 1024, 'x');
    while (!done) {
      if (::send(from, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) return;
    }
  });
  std::vector<char> buffer(256 * 1024);
  // Past slow start first, then measure.
  const auto warm = std::chrono::steady_clock::now();
  while (ms_since(warm) < 500) ::recv(to, buffer.data(), buffer.size(), 0);
  // What already waits in the socket arrived before the window: not counted in it.
  while (::recv(to, buffer.data(), buffer.size(), MSG_DONTWAIT) > 0) {
  }
  uint64_t bytes = 0;
  const auto t = std::chrono::steady_clock::now();
  while (ms_since(t) < 1500) {
    const ssize_t n = ::recv(to, buffer.data(), buffer.size(), 0);
    if (n <= 0) break;
    bytes += static_cast<uint64_t>(n);
  }
  const double mbit = static_cast<double>(bytes) * 8 / (ms_since(t) / 1000) / 1e6;
  done = true;
  ::shutdown(from, SHUT_RDWR);
  return mbit;
}

// Echoes every datagram on `fd` back to its sender until `stop`.
inline std::jthread echo_server(int fd) {
  return std::jthread([fd](std::stop_token stop) {
    while (!stop.stop_requested()) {
      if (auto d = receive(fd, std::chrono::milliseconds(20)))
        send_to(fd, d->from_ip, d->from_port, d->bytes);
    }
  });
}

// Round trips of `count` pings from `host` to the hub's echo port, in ms (lost ones left out).
inline std::vector<double> round_trips(const EmulatedInternet& net, size_t host, int count) {
  const int fd = udp_in(net.netns(host), 0);
  std::vector<double> rtts;
  for (int i = 0; i < count; ++i) {
    const auto t = std::chrono::steady_clock::now();
    send_to(fd, EmulatedInternet::kHubIp, 7000, "ping" + std::to_string(i));
    while (auto d = receive(fd, std::chrono::milliseconds(1000))) {
      if (d->bytes == "ping" + std::to_string(i)) {
        rtts.push_back(ms_since(t));
        break;
      }
    }
  }
  ::close(fd);
  return rtts;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace stoa::net::netem::sockets
