#include "net/frame_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace stoa::net {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point until) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

// Waits for `events` on fd until `until`; false on timeout.
bool wait_for(int fd, short events, Clock::time_point until) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, remaining_ms(until));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

void set_nodelay(int fd) {
  // Frames are written whole; Nagle would hold a small answer frame for an ACK.
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

FrameSocket FrameSocket::connect(const std::string& host, int port, Deadline deadline) {
  const std::string peer = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  STOA_CHECK(rc == 0 && found != nullptr, ErrorKind::kNetwork, "cannot resolve ", peer, ": ",
             gai_strerror(rc));
  const Clock::time_point until = Clock::now() + deadline;
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int r = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      if (wait_for(fd, POLLOUT, until)) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        r = err == 0 ? 0 : -1;
        errno = err;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (r == 0) {
      ::freeaddrinfo(found);
      set_nodelay(fd);
      return FrameSocket(fd, peer);
    }
    last_error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  fail(ErrorKind::kNetwork, "cannot connect to ", peer, ": ", last_error);
}

FrameSocket::FrameSocket(FrameSocket&& other) noexcept
    : fd_(other.fd_), peer_(std::move(other.peer_)) {
  other.fd_ = -1;
}

FrameSocket& FrameSocket::operator=(FrameSocket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    peer_ = std::move(other.peer_);
    other.fd_ = -1;
  }
  return *this;
}

FrameSocket::~FrameSocket() {
  close();
}

void FrameSocket::write_all(const uint8_t* data, size_t n, Clock::time_point until) {
  while (n > 0) {
    const ssize_t w = ::send(fd_, data, n, MSG_NOSIGNAL);
    if (w > 0) {
      data += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      STOA_CHECK(wait_for(fd_, POLLOUT, until), ErrorKind::kNetwork, "sending a frame to ", peer_,
                 " timed out");
      continue;
    }
    fail(ErrorKind::kNetwork, "sending a frame to ", peer_, " failed: ", std::strerror(errno));
  }
}

void FrameSocket::read_all(uint8_t* data, size_t n, Clock::time_point until, const char* what) {
  while (n > 0) {
    const ssize_t r = ::recv(fd_, data, n, 0);
    if (r > 0) {
      data += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    STOA_CHECK(r != 0, ErrorKind::kNetwork, peer_, " closed the connection in ", what);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      STOA_CHECK(wait_for(fd_, POLLIN, until), ErrorKind::kNetwork, "waiting for ", what, " from ",
                 peer_, " timed out");
      continue;
    }
    fail(ErrorKind::kNetwork, "reading ", what, " from ", peer_, " failed: ", std::strerror(errno));
  }
}

void FrameSocket::send(std::span<const uint8_t> frame, Deadline deadline) {
  STOA_CHECK(open(), ErrorKind::kNetwork, "sending on a closed connection to ", peer_);
  const Clock::time_point until = Clock::now() + deadline;
  uint8_t header[8];
  const uint64_t n = frame.size();
  for (int i = 0; i < 8; ++i) header[i] = static_cast<uint8_t>(n >> (8 * i));
  write_all(header, sizeof header, until);
  write_all(frame.data(), frame.size(), until);
}

std::vector<uint8_t> FrameSocket::receive(Deadline deadline, uint64_t max_bytes) {
  STOA_CHECK(open(), ErrorKind::kNetwork, "receiving on a closed connection to ", peer_);
  const Clock::time_point until = Clock::now() + deadline;
  uint8_t header[8];
  read_all(header, sizeof header, until, "a frame header");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(header[i]) << (8 * i);
  STOA_CHECK(n <= max_bytes, ErrorKind::kNetwork, peer_, " announced a frame of ", n,
             " bytes, over the bound of ", max_bytes);
  std::vector<uint8_t> frame(n);
  read_all(frame.data(), frame.size(), until, "a frame");
  return frame;
}

bool FrameSocket::wait_readable(Deadline deadline) {
  return open() && wait_for(fd_, POLLIN, Clock::now() + deadline);
}

void FrameSocket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void FrameSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

FrameListener::FrameListener(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  STOA_CHECK(::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1, ErrorKind::kInvalidArgument,
             "a stage listens on an IPv4 address, not '", host, "'");
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  STOA_CHECK(fd_ >= 0, ErrorKind::kIo, "socket: ", std::strerror(errno));
  int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 8) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    fail(ErrorKind::kNetwork, "cannot listen on ", host, ":", port, ": ", why);
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
}

FrameListener::~FrameListener() {
  close();
  ::close(fd_);
}

FrameSocket FrameListener::accept(Deadline deadline) {
  const Clock::time_point until = Clock::now() + deadline;
  for (;;) {
    STOA_CHECK(!closed_, ErrorKind::kNetwork, "the listener is closed");
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    const int fd =
        ::accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      set_nodelay(fd);
      char ip[INET_ADDRSTRLEN] = "?";
      ::inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
      return FrameSocket(fd, std::string(ip) + ":" + std::to_string(ntohs(peer.sin_port)));
    }
    STOA_CHECK(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR, ErrorKind::kNetwork,
               "accept failed: ", std::strerror(errno));
    // In slices, so close() from another thread is seen promptly.
    const Clock::time_point slice = std::min(until, Clock::now() + std::chrono::milliseconds(100));
    if (!wait_for(fd_, POLLIN, slice))
      STOA_CHECK(Clock::now() < until, ErrorKind::kNetwork,
                 "no connection came within the deadline");
  }
}

void FrameListener::close() {
  if (!closed_.exchange(true)) ::shutdown(fd_, SHUT_RDWR);
}

std::pair<std::string, int> parse_host_port(const std::string& address, const char* what) {
  const size_t colon = address.rfind(':');
  STOA_CHECK(colon != std::string::npos && colon + 1 < address.size(), ErrorKind::kInvalidArgument,
             what, " '", address, "' is not host:port");
  int port = -1;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
  }
  STOA_CHECK(port >= 0 && port <= 65535, ErrorKind::kInvalidArgument, what, " '", address,
             "' has no valid port");
  return {address.substr(0, colon), port};
}

}  // namespace stoa::net
