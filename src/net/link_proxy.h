// A TCP forwarding proxy that emulates a bad link: every chunk read on one side is delivered to
// the other side after (a) waiting its turn on a serialised link of `rate_bytes_per_s` (0: no
// limit) and (b) a fixed one-way propagation `delay`. Chunks pipeline (the link is not
// stop-and-wait), so throughput is bounded by the rate, latency by the delay — like a real link.
// It can also cut every connection once it has delivered N bytes towards the client (a home link
// that falls over every N MB: what a resumed download must survive). It counts the bytes it
// forwards each way, which is what `stoa bench fleet` and `stoa bench scale` report as bytes on
// the wire (payload, without TCP/IP headers), and the cuts.
//
// Benches and tests only: the worker and the hub never route through it.
//
// Why our own: `netem` is not available in the sandbox this was built in; `tbf` (rate only)
// is, so the fleet bench puts workers behind veth + tbf and this proxy for the delay, and falls
// back to this proxy's own rate limit when network namespaces are not usable.
//
// One thread per direction per connection (a handful of keep-alive connections per worker).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace stoa::net {

struct LinkProxyOptions {
  std::string listen_host = "127.0.0.1";
  int listen_port = 0;  // 0: any free port (see LinkProxy::port())
  std::string target_host = "127.0.0.1";
  int target_port = 0;
  std::chrono::microseconds one_way_delay{0};  // added in each direction
  double rate_bytes_per_s = 0;                 // per direction; 0: unlimited
  // Bytes queued in the proxy per direction before it stops reading (TCP back-pressure then
  // holds the sender). Must cover rate × delay, or the delay throttles the throughput.
  size_t max_queued_bytes = 4u << 20;
  // Cut each connection (both ends) once exactly this many bytes reached the client; 0: never.
  // Set here (not only by set_cut_after), the proxy's receive buffer towards the target is kept
  // small, so that what it acknowledges past a cut is little, as on a real link.
  uint64_t cut_after_bytes = 0;
};

struct LinkProxyCounters {
  uint64_t bytes_to_target = 0;  // client → target ("up" for a worker behind it)
  uint64_t bytes_to_client = 0;  // target → client ("down")
  uint64_t connections = 0;
  uint64_t connect_failures = 0;
  uint64_t cuts = 0;  // connections cut at cut_after_bytes
};

class LinkProxy {
 public:
  // Binds and starts accepting at once; throws stoa::Error(kNetwork) naming the address when it
  // cannot bind, kInvalidArgument for bad options.
  explicit LinkProxy(LinkProxyOptions options);
  ~LinkProxy();  // stop()
  LinkProxy(const LinkProxy&) = delete;
  LinkProxy& operator=(const LinkProxy&) = delete;

  int port() const { return port_; }
  std::string url() const;  // "http://listen_host:port"
  LinkProxyCounters counters() const;
  // Changes the cut for every connection, open ones included: one already past it is cut before
  // it delivers anything more.
  void set_cut_after(uint64_t bytes) { cut_after_bytes_ = bytes; }
  // Closes the listener and every connection, joins all threads. Idempotent.
  void stop();

 private:
  struct Connection;
  void accept_loop();
  void pump(std::shared_ptr<Connection> c, bool to_target);

  LinkProxyOptions options_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> bytes_to_target_{0};
  std::atomic<uint64_t> bytes_to_client_{0};
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> connect_failures_{0};
  std::atomic<uint64_t> cut_after_bytes_{0};
  std::atomic<uint64_t> cuts_{0};
  std::mutex mutex_;  // guards conns_
  std::vector<std::shared_ptr<Connection>> conns_;
  // Pumps run detached (a connection may come and go at any time); stop() waits for the count
  // of live pumps to reach zero before the proxy can be destroyed.
  std::mutex pumps_mutex_;
  std::condition_variable pumps_cv_;
  int pumps_active_ = 0;
  std::thread acceptor_;
};

}  // namespace stoa::net
