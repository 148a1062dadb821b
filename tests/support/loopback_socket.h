// A TCP socket on a free port of 127.0.0.1, for the tests' own servers and proxies and for a port
// that nothing answers on.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace stoa::test {

struct LoopbackSocket {
  int fd = -1;
  int port = 0;
};

// Bound to a free loopback port and, with backlog > 0, listening; backlog 0 leaves it bound
// only (closed, its port is one where nothing listens). Throws when the kernel refuses.
inline LoopbackSocket bind_loopback(int backlog) {
  LoopbackSocket s;
  s.fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;  // any free port
  socklen_t len = sizeof(a);
  if (s.fd < 0 || ::bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      (backlog > 0 && ::listen(s.fd, backlog) != 0) ||
      ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (s.fd >= 0) ::close(s.fd);
    throw std::runtime_error("cannot bind a loopback port");
  }
  s.port = ntohs(a.sin_port);
  return s;
}

}  // namespace stoa::test
