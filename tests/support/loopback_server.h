// An httplib server on a free loopback port, serving from its own thread: the fake environments,
// blob servers and intakes of the tests, which differ only in their handlers.
#pragma once
#include <httplib.h>

#include <chrono>
#include <string>
#include <thread>

namespace stoa::test {

class LoopbackServer {
 public:
  LoopbackServer() = default;
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;
  // Stops serving. Declare the server after whatever its handlers use, so that it stops first.
  ~LoopbackServer() {
    if (!thread_.joinable()) return;
    http.stop();
    thread_.join();
  }

  // Binds a free port and returns once the server accepts: register the handlers on `http` first.
  void start() {
    port_ = http.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http.listen_after_bind(); });
    while (!http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  httplib::Server http;

 private:
  int port_ = 0;
  std::thread thread_;
};

}  // namespace stoa::test
