// The hub's HTTP(S) front end: maps the routes of docs/protocol.md onto a Hub. cpp-httplib with
// a fixed thread pool (long-polls each hold a thread, so the pool is sized for the fleet), request
// bodies bounded, every handler wrapped so that bad input becomes a 4xx JSON error and never
// takes the process down. HTTPS (OpenSSL) when a certificate and key are configured.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "roles/hub/hub.h"

namespace httplib {
class Server;
}

namespace stoa::hub {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (see HubServer::port())
  int threads = 32;
  size_t max_body_bytes = 32u << 20;
  int max_long_poll_s = 60;
  std::string tls_cert_path;  // both set: HTTPS
  std::string tls_key_path;
};

class HubServer {
 public:
  HubServer(Hub& hub, ServerOptions options);
  ~HubServer();  // stops
  HubServer(const HubServer&) = delete;
  HubServer& operator=(const HubServer&) = delete;

  // Binds (throws kIo if the port is taken) and serves on a background thread.
  void start();
  void stop();
  int port() const { return port_; }
  bool tls() const { return tls_; }
  std::string url() const;

 private:
  void routes();

  Hub& hub_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace stoa::hub
