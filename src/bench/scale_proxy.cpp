#include "bench/scale_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace stoa::bench {

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Writes all of `data`; false when the peer is gone.
bool send_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

CuttingProxy::CuttingProxy(uint16_t target_port, uint64_t cut_after_bytes)
    : target_port_(target_port), cut_after_(cut_after_bytes) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  STOA_CHECK(listen_fd_ >= 0, ErrorKind::kNetwork, "proxy: socket: ", std::strerror(errno));
  sockaddr_in a = loopback(0);
  STOA_CHECK(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                 ::listen(listen_fd_, 16) == 0,
             ErrorKind::kNetwork, "proxy: bind/listen: ", std::strerror(errno));
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

CuttingProxy::~CuttingProxy() {
  stop_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  std::lock_guard lock(mutex_);
  for (auto& t : relays_) t.join();
}

void CuttingProxy::accept_loop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    if (client < 0) continue;
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(target_port_);
    if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(client);
      if (server >= 0) ::close(server);
      continue;
    }
    ++connections_;
    std::lock_guard lock(mutex_);
    relays_.emplace_back([this, client, server] { relay(client, server); });
  }
}

void CuttingProxy::relay(int client, int server) {
  uint64_t sent_to_client = 0;
  std::vector<char> buffer(64 * 1024);
  bool open = true;
  while (open && !stop_) {
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    const int ready = ::poll(fds, 2, 100);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    for (int i = 0; i < 2 && open; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int from = fds[i].fd, to = i == 0 ? server : client;
      size_t want = buffer.size();
      // Towards the client: never past the cut, so the cut lands at exactly N bytes.
      if (to == client && cut_after_ > 0)
        want = static_cast<size_t>(std::min<uint64_t>(want, cut_after_ - sent_to_client));
      const ssize_t n = ::recv(from, buffer.data(), want, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || !send_all(to, buffer.data(), static_cast<size_t>(n))) {
        open = false;
        break;
      }
      if (to == client) {
        sent_to_client += static_cast<uint64_t>(n);
        bytes_to_client_ += static_cast<uint64_t>(n);
        if (cut_after_ > 0 && sent_to_client >= cut_after_) {
          ++cuts_;
          open = false;
        }
      }
    }
  }
  ::shutdown(client, SHUT_RDWR);
  ::shutdown(server, SHUT_RDWR);
  ::close(client);
  ::close(server);
}

}  // namespace stoa::bench
