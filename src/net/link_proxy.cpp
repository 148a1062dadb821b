#include "net/link_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>

#include "core/error.h"
#include "core/log.h"

namespace stoa::net {
namespace {

using Clock = std::chrono::steady_clock;

sockaddr_in make_addr(const std::string& host, int port, const char* what) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  STOA_CHECK(inet_pton(AF_INET, host.c_str(), &a.sin_addr) == 1, ErrorKind::kInvalidArgument,
             "link proxy: ", what, " '", host, "' is not an IPv4 address");
  return a;
}

void set_nodelay(int fd) {
  // The proxy decides when bytes leave; Nagle would add its own, unaccounted delay.
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

struct LinkProxy::Connection {
  int client_fd = -1;
  int target_fd = -1;
  std::atomic<int> pumps_left{2};
  ~Connection() {
    if (client_fd >= 0) ::close(client_fd);
    if (target_fd >= 0) ::close(target_fd);
  }
  void abort() {  // wakes both pumps; the fds are closed by the destructor
    ::shutdown(client_fd, SHUT_RDWR);
    ::shutdown(target_fd, SHUT_RDWR);
  }
};

LinkProxy::LinkProxy(LinkProxyOptions options)
    : options_(std::move(options)), cut_after_bytes_(options_.cut_after_bytes) {
  STOA_CHECK(options_.target_port > 0 && options_.target_port < 65536, ErrorKind::kInvalidArgument,
             "link proxy: target port ", options_.target_port, " is out of range");
  STOA_CHECK(options_.one_way_delay.count() >= 0 && options_.rate_bytes_per_s >= 0 &&
                 std::isfinite(options_.rate_bytes_per_s),
             ErrorKind::kInvalidArgument, "link proxy: negative delay or rate");
  STOA_CHECK(options_.max_queued_bytes >= 65536, ErrorKind::kInvalidArgument,
             "link proxy: max_queued_bytes must be at least 64 KiB");
  make_addr(options_.target_host, options_.target_port, "target host");
  sockaddr_in a = make_addr(options_.listen_host, options_.listen_port, "listen host");
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  STOA_CHECK(listen_fd_ >= 0, ErrorKind::kNetwork, "link proxy: socket: ", std::strerror(errno));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    const std::string why = std::strerror(errno);
    ::close(listen_fd_);
    fail(ErrorKind::kNetwork, "link proxy: cannot listen on ", options_.listen_host, ":",
         options_.listen_port, ": ", why);
  }
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

LinkProxy::~LinkProxy() {
  stop();
}

std::string LinkProxy::url() const {
  return "http://" + options_.listen_host + ":" + std::to_string(port_);
}

LinkProxyCounters LinkProxy::counters() const {
  return {bytes_to_target_, bytes_to_client_, connections_, connect_failures_, cuts_};
}

void LinkProxy::stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  {
    std::lock_guard lock(mutex_);
    for (auto& c : conns_) c->abort();
  }
  {
    std::unique_lock lock(pumps_mutex_);
    pumps_cv_.wait(lock, [&] { return pumps_active_ == 0; });
  }
  std::lock_guard g(mutex_);
  conns_.clear();
}

void LinkProxy::accept_loop() {
  const sockaddr_in target = make_addr(options_.target_host, options_.target_port, "target");
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int cfd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0) continue;
    auto c = std::make_shared<Connection>();
    c->client_fd = cfd;
    c->target_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    // A link that falls over loses its bytes in flight unacknowledged; a proxy that stops
    // reading at the cut would instead have acknowledged whatever its receive buffer took
    // (megabytes on loopback) and dropped it, so the sender would count as delivered what never
    // arrived. A cutting proxy keeps that buffer small (set before connect, for the window).
    if (c->target_fd >= 0 && options_.cut_after_bytes > 0) {
      const int small = 64 << 10;
      ::setsockopt(c->target_fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    }
    if (c->target_fd < 0 ||
        ::connect(c->target_fd, reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0) {
      ++connect_failures_;
      log_warn("proxy", "connect to ", options_.target_host, ":", options_.target_port, ": ",
               std::strerror(errno));
      continue;  // the destructor closes the client: it sees a reset, as with a dead host
    }
    set_nodelay(c->client_fd);
    set_nodelay(c->target_fd);
    ++connections_;
    {
      std::lock_guard lock(mutex_);
      // Forget connections both of whose pumps are done (their fds are closed by then).
      std::erase_if(conns_, [](const auto& x) { return x->pumps_left.load() == 0; });
      conns_.push_back(c);
    }
    {
      std::lock_guard lock(pumps_mutex_);
      pumps_active_ += 2;
    }
    std::thread([this, c] { pump(c, true); }).detach();
    std::thread([this, c] { pump(c, false); }).detach();
  }
}

void LinkProxy::pump(std::shared_ptr<Connection> c, bool to_target) {
  const int src = to_target ? c->client_fd : c->target_fd;
  const int dst = to_target ? c->target_fd : c->client_fd;
  std::atomic<uint64_t>& counter = to_target ? bytes_to_target_ : bytes_to_client_;
  struct Chunk {
    std::string data;
    Clock::time_point due;
  };
  std::deque<Chunk> queue;
  size_t queued = 0;
  bool eof = false;
  bool failed = false;
  // Towards the client only: the bytes read for it so far, and whether the cut has been reached
  // (nothing more is read; the connection is cut once what was read has been delivered).
  uint64_t read_for_client = 0;
  bool cutting = false;
  bool cut = false;
  Clock::time_point link_free = Clock::now();
  std::string buf(64 * 1024, '\0');
  while (!stopping_) {
    Clock::time_point now = Clock::now();
    while (!queue.empty() && queue.front().due <= now) {
      Chunk& ch = queue.front();
      if (!send_all(dst, ch.data.data(), ch.data.size())) {
        failed = true;
        break;
      }
      counter += ch.data.size();
      queued -= ch.data.size();
      queue.pop_front();
      now = Clock::now();
    }
    if (failed) break;
    if (cutting && queue.empty()) {
      ++cuts_;
      cut = true;
      break;
    }
    if (eof && queue.empty()) {
      ::shutdown(dst, SHUT_WR);  // pass the half-close on: HTTP keep-alive peers rely on it
      break;
    }
    auto wait = std::chrono::microseconds(100'000);
    if (!queue.empty())
      wait = std::min(
          wait, std::chrono::duration_cast<std::chrono::microseconds>(queue.front().due - now) +
                    std::chrono::microseconds(1));
    // Never read past the cut, so that it lands at exactly that many bytes. The limit is read
    // again after each wait: one lowered under what was read already cuts at once.
    const auto room_before_cut = [&]() -> uint64_t {
      const uint64_t limit = to_target ? 0 : cut_after_bytes_.load();
      if (limit == 0) return UINT64_MAX;
      if (read_for_client >= limit) cutting = true;
      return cutting ? 0 : limit - read_for_client;
    };
    if (!cutting) room_before_cut();
    const bool can_read = !eof && !cutting && queued < options_.max_queued_bytes;
    pollfd p{src, static_cast<short>(can_read ? POLLIN : 0), 0};
    const timespec ts{static_cast<time_t>(wait.count() / 1'000'000),
                      static_cast<long>(wait.count() % 1'000'000) * 1000};
    if (::ppoll(&p, 1, &ts, nullptr) <= 0 || !can_read) continue;
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), room_before_cut()));
    if (want == 0) continue;
    const ssize_t n = ::recv(src, buf.data(), want, 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      failed = true;
      break;
    }
    if (n == 0) {
      eof = true;
      continue;
    }
    if (!to_target) read_for_client += static_cast<uint64_t>(n);
    room_before_cut();  // reached: what was read is delivered, then the connection is cut
    now = Clock::now();
    Clock::time_point depart = now;
    if (options_.rate_bytes_per_s > 0) {
      // Serialised link: this chunk starts when the previous one has left, and takes
      // size / rate to go out.
      const Clock::time_point start = std::max(now, link_free);
      link_free = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                              static_cast<double>(n) / options_.rate_bytes_per_s));
      depart = link_free;
    }
    queue.push_back(
        {std::string(buf.data(), static_cast<size_t>(n)), depart + options_.one_way_delay});
    queued += static_cast<size_t>(n);
  }
  if (failed || cut || stopping_) c->abort();
  c->pumps_left.fetch_sub(1);
  c.reset();  // the last pump out closes both fds
  std::lock_guard lock(pumps_mutex_);
  if (--pumps_active_ == 0) pumps_cv_.notify_all();
}

}  // namespace stoa::net
