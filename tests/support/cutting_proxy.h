// A TCP proxy for download tests that drops every connection once it has forwarded `cut_every`
// bytes towards the client (a home link that falls over every N MB). It counts the bytes it
// forwarded to clients — what "moved over the link" means in the resume tests — and the cuts.
// Blocking sockets, one thread per direction per connection; test-sized traffic only.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/loopback_socket.h"

namespace stoa::test {

class CuttingProxy {
 public:
  CuttingProxy(int target_port, uint64_t cut_every) : target_port_(target_port), cut_(cut_every) {
    const LoopbackSocket listening = bind_loopback(16);
    listen_fd_ = listening.fd;
    port_ = listening.port;
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~CuttingProxy() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    acceptor_.join();
    std::lock_guard lock(mutex_);
    for (auto& c : conns_) c->close_both();
    for (auto& t : pumps_) t.join();
  }
  CuttingProxy(const CuttingProxy&) = delete;
  CuttingProxy& operator=(const CuttingProxy&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  uint64_t bytes_to_client() const { return to_client_; }
  uint64_t cuts() const { return cuts_; }
  void set_cut_every(uint64_t bytes) { cut_ = bytes; }

 private:
  struct Conn {
    int client = -1, target = -1;
    std::atomic<uint64_t> sent{0};  // towards the client
    std::once_flag closed;
    ~Conn() {
      ::close(client);
      ::close(target);
    }
    void close_both() {
      std::call_once(closed, [this] {
        ::shutdown(client, SHUT_RDWR);
        ::shutdown(target, SHUT_RDWR);
      });
    }
  };

  void accept_loop() {
    while (!stopping_) {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      auto c = std::make_shared<Conn>();
      c->client = fd;
      c->target = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(target_port_));
      if (::connect(c->target, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        ::close(c->target);
        ::close(fd);
        continue;
      }
      std::lock_guard lock(mutex_);
      conns_.push_back(c);
      pumps_.emplace_back([this, c] { pump(c, true); });
      pumps_.emplace_back([this, c] { pump(c, false); });
    }
  }

  void pump(std::shared_ptr<Conn> c, bool to_client) {
    const int from = to_client ? c->target : c->client;
    const int to = to_client ? c->client : c->target;
    char buf[16384];
    for (;;) {
      ssize_t n = ::recv(from, buf, sizeof(buf), 0);
      if (n <= 0) break;
      size_t send_n = static_cast<size_t>(n);
      bool cut = false;
      // One read of the limit: a test may lower it while this connection is past the new value
      // (then nothing more is sent), which must not wrap around into a huge send.
      const uint64_t limit = cut_.load();
      const uint64_t already = c->sent.load();
      if (to_client && limit > 0 && already + send_n >= limit) {
        send_n = already >= limit ? 0 : static_cast<size_t>(limit - already);
        cut = true;
      }
      if (send_n > 0 && ::send(to, buf, send_n, MSG_NOSIGNAL) != static_cast<ssize_t>(send_n))
        break;
      if (to_client) {
        c->sent += send_n;
        to_client_ += send_n;
      }
      if (cut) {
        ++cuts_;
        break;
      }
    }
    c->close_both();
  }

  int target_port_;
  std::atomic<uint64_t> cut_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> to_client_{0};
  std::atomic<uint64_t> cuts_{0};
  std::mutex mutex_;
  std::vector<std::shared_ptr<Conn>> conns_;
  std::vector<std::thread> pumps_;
  std::thread acceptor_;
};

}  // namespace stoa::test
