// Internal to the async HTTP server (http_server.h): the state every connection shares — the
// options, the router, the I/O context, the WorkPool, the connection counts per client IP and
// the list of parked requests that wake_parked() wakes.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

#include "roles/hub/http/http_server.h"
#include "roles/hub/http/work_pool.h"

namespace stoa::hub {

// A parked request's connection, as the wake list sees it.
class Parkable {
 public:
  virtual ~Parkable() = default;
  virtual void wake() = 0;  // thread-safe: posts onto the connection's strand
};

struct HttpServer::Core {
  Core(HttpServerOptions o, Router r);
  ~Core();

  // Counts a new connection from `ip`; false (nothing counted) when a cap is reached.
  bool admit(const std::string& ip);
  void release(const std::string& ip);
  uint64_t park(std::weak_ptr<Parkable> waiter);
  void unpark(uint64_t id);
  void wake_all();  // posts wake() to every parked connection

  HttpServerOptions options;
  Router router;
  std::unique_ptr<boost::asio::io_context> ioc;
  std::optional<boost::asio::ssl::context> ssl;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor;
  std::unique_ptr<WorkPool> pool;
  std::vector<std::thread> io_threads;
  int port = 0;
  bool stopped = false;  // guarded by park_mutex

  std::atomic<uint64_t> wake_epoch{0};  // bumped by every wake_all()
  std::atomic<uint64_t> refused{0}, timed_out{0}, gone_while_parked{0}, busy{0};

  mutable std::mutex conn_mutex;
  std::map<std::string, size_t> per_ip;
  size_t connections = 0;

  mutable std::mutex park_mutex;
  std::map<uint64_t, std::weak_ptr<Parkable>> parked;
  uint64_t next_park_id = 1;
};

// Held by a connection for its lifetime: its place in the connection counts.
class ConnectionSlot {
 public:
  ConnectionSlot(HttpServer::Core& core, std::string ip) : core_(core), ip_(std::move(ip)) {}
  ~ConnectionSlot() { core_.release(ip_); }
  ConnectionSlot(const ConnectionSlot&) = delete;
  ConnectionSlot& operator=(const ConnectionSlot&) = delete;
  const std::string& ip() const { return ip_; }

 private:
  HttpServer::Core& core_;
  std::string ip_;
};

// Starts serving an accepted socket (plain or TLS, per the core's options).
void start_connection(HttpServer::Core& core, boost::asio::ip::tcp::socket socket,
                      std::unique_ptr<ConnectionSlot> slot);

}  // namespace stoa::hub
