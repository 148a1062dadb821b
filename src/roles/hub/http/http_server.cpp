#include "roles/hub/http/http_server.h"

#include <boost/beast/core.hpp>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "roles/hub/http/http_core.h"

namespace stoa::hub {

namespace asio = boost::asio;
using asio::ip::tcp;

std::string RequestContext::header(const std::string& lower_case_name) const {
  auto it = headers.find(lower_case_name);
  return it == headers.end() ? std::string() : it->second;
}

// ---------------------------------------------------------------- Core

HttpServer::Core::Core(HttpServerOptions o, Router r)
    : options(std::move(o)), router(std::move(r)), ioc(std::make_unique<asio::io_context>()) {}

HttpServer::Core::~Core() {
  // Queued handlers own connections; connections own sockets of the io_context and count
  // themselves out of `per_ip` when destroyed — so the pool goes first, then the io_context,
  // while the maps they touch are still alive.
  if (pool) pool->stop();
  pool.reset();
  acceptor.reset();
  ioc.reset();
}

bool HttpServer::Core::admit(const std::string& ip) {
  std::lock_guard<std::mutex> lock(conn_mutex);
  size_t& mine = per_ip[ip];
  if (connections >= options.max_connections || mine >= options.max_connections_per_ip) {
    if (mine == 0) per_ip.erase(ip);
    return false;
  }
  ++mine;
  ++connections;
  return true;
}

void HttpServer::Core::release(const std::string& ip) {
  std::lock_guard<std::mutex> lock(conn_mutex);
  auto it = per_ip.find(ip);
  if (it != per_ip.end() && --it->second == 0) per_ip.erase(it);
  --connections;
}

uint64_t HttpServer::Core::park(std::weak_ptr<Parkable> waiter) {
  std::lock_guard<std::mutex> lock(park_mutex);
  uint64_t id = next_park_id++;
  parked.emplace(id, std::move(waiter));
  return id;
}

void HttpServer::Core::unpark(uint64_t id) {
  std::lock_guard<std::mutex> lock(park_mutex);
  parked.erase(id);
}

void HttpServer::Core::wake_all() {
  ++wake_epoch;
  // Posting under the lock: stop() takes it before destroying the io_context, so no wake is
  // ever posted to a destroyed one.
  std::lock_guard<std::mutex> lock(park_mutex);
  if (stopped) return;
  for (auto& [id, w] : parked) {
    if (auto p = w.lock()) p->wake();
  }
}

namespace {

std::string peer_ip_of(const tcp::socket& socket) {
  boost::system::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return "?";
  auto addr = ep.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, addr.to_v6()).to_string();
  }
  return addr.to_string();
}

// Over a cap: a plain connection hears a 503 with Retry-After before it is closed; a TLS one is
// closed (answering would cost a handshake).
void refuse(HttpServer::Core& core, tcp::socket socket, const std::string& ip) {
  ++core.refused;
  if (core.ssl) return;
  auto sock = std::make_shared<tcp::socket>(std::move(socket));
  std::string body = nlohmann::json{{"error", "too many connections from " + ip}}.dump();
  auto text = std::make_shared<std::string>(
      "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Type: application/json\r\n"
      "Connection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body);
  asio::async_write(*sock, asio::buffer(*text), [sock, text](boost::system::error_code, size_t) {
    boost::system::error_code ignored;
    sock->shutdown(tcp::socket::shutdown_both, ignored);
    sock->close(ignored);
  });
}

void accept_loop(HttpServer::Core& core) {
  core.acceptor->async_accept(
      asio::make_strand(*core.ioc), [&core](boost::system::error_code ec, tcp::socket socket) {
        if (ec == asio::error::operation_aborted || !core.acceptor->is_open()) return;
        if (!ec) {
          boost::system::error_code ignored;
          socket.set_option(tcp::no_delay(true), ignored);
          std::string ip = peer_ip_of(socket);
          if (core.admit(ip)) {
            start_connection(core, std::move(socket), std::make_unique<ConnectionSlot>(core, ip));
          } else {
            refuse(core, std::move(socket), ip);
          }
        } else if (ec == asio::error::no_descriptors) {
          log_warn("hub", "accept: out of file descriptors (", ec.message(), ")");
        }
        accept_loop(core);
      });
}

}  // namespace

// ---------------------------------------------------------------- HttpServer

HttpServer::HttpServer(HttpServerOptions options, Router router)
    : core_(std::make_shared<Core>(std::move(options), std::move(router))) {
  auto& o = core_->options;
  bool tls = !o.tls_cert_path.empty() || !o.tls_key_path.empty();
  if (!tls) return;
  STOA_CHECK(!o.tls_cert_path.empty() && !o.tls_key_path.empty(), ErrorKind::kInvalidArgument,
             "hub: TLS needs both a certificate and a key");
  core_->ssl.emplace(asio::ssl::context::tls_server);
  auto& ctx = *core_->ssl;
  ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                  asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                  asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
  boost::system::error_code ec1, ec2;
  ctx.use_certificate_chain_file(o.tls_cert_path, ec1);
  ctx.use_private_key_file(o.tls_key_path, asio::ssl::context::pem, ec2);
  STOA_CHECK(!ec1 && !ec2, ErrorKind::kBadFormat, "hub: cannot load TLS certificate '",
             o.tls_cert_path, "' / key '", o.tls_key_path, "': ", (ec1 ? ec1 : ec2).message());
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::start() {
  auto& core = *core_;
  auto& o = core.options;
  boost::system::error_code ec;
  auto address = asio::ip::make_address(o.host == "localhost" ? "127.0.0.1" : o.host, ec);
  STOA_CHECK(!ec, ErrorKind::kInvalidArgument, "hub: cannot bind '", o.host,
             "': not an IP address");
  tcp::endpoint endpoint(address, static_cast<uint16_t>(o.port));
  core.acceptor = std::make_unique<tcp::acceptor>(*core.ioc);
  core.acceptor->open(endpoint.protocol(), ec);
  if (!ec) core.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) core.acceptor->bind(endpoint, ec);
  if (!ec) core.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  STOA_CHECK(!ec, ErrorKind::kIo, "hub: cannot bind ", o.host, ":", o.port, " (", ec.message(),
             ")");
  core.port = core.acceptor->local_endpoint().port();
  core.pool = std::make_unique<WorkPool>(o.handler_threads, o.max_queued_requests);
  accept_loop(core);
  for (int i = 0; i < std::max(1, o.io_threads); ++i) {
    core.io_threads.emplace_back([&core] {
      for (;;) {
        try {
          core.ioc->run();
          return;
        } catch (const std::exception& e) {
          log_error("hub", "HTTP I/O thread: ", e.what());
        }
      }
    });
  }
}

void HttpServer::stop() {
  auto& core = *core_;
  {
    std::lock_guard<std::mutex> lock(core.park_mutex);
    if (core.stopped) return;
    core.stopped = true;
  }
  if (core.acceptor) {
    asio::post(*core.ioc, [&core] {
      boost::system::error_code ignored;
      core.acceptor->close(ignored);
    });
  }
  if (core.pool) core.pool->stop();
  core.ioc->stop();
  for (auto& t : core.io_threads) {
    if (t.joinable()) t.join();
  }
  // Destroying the io_context destroys its pending handlers and with them every connection
  // (closing its socket): clients see the hub go away now, not when this object dies.
  core.acceptor.reset();
  core.ioc.reset();
}

int HttpServer::port() const {
  return core_->port;
}

bool HttpServer::tls() const {
  return core_->ssl.has_value();
}

void HttpServer::wake_parked() {
  core_->wake_all();
}

std::function<void()> HttpServer::waker() const {
  return [weak = std::weak_ptr<Core>(core_)] {
    if (auto core = weak.lock()) core->wake_all();
  };
}

HttpServerStats HttpServer::stats() const {
  HttpServerStats s;
  {
    std::lock_guard<std::mutex> lock(core_->conn_mutex);
    s.connections = core_->connections;
  }
  {
    std::lock_guard<std::mutex> lock(core_->park_mutex);
    s.parked = core_->parked.size();
  }
  s.refused_connections = core_->refused;
  s.timed_out = core_->timed_out;
  s.gone_while_parked = core_->gone_while_parked;
  s.busy_replies = core_->busy;
  return s;
}

double HttpServer::cpu_seconds() const {
  double total = core_->pool ? core_->pool->cpu_seconds() : 0;
  for (auto& t : core_->io_threads) total += thread_cpu_seconds(t);
  return total;
}

}  // namespace stoa::hub
