// A TCP proxy on loopback that cuts every connection after it has carried N bytes from the
// server to the client: the bad link of issue 17's resume test. A download through it must
// resume (HTTP Range) after each cut; the proxy counts what it moved so the bench can say how
// many bytes the blob cost on the wire.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace stoa::bench {

class CuttingProxy {
 public:
  // Forwards 127.0.0.1:port() to 127.0.0.1:target_port; each connection is closed (both ends)
  // once it has sent `cut_after_bytes` bytes towards the client (0: never).
  CuttingProxy(uint16_t target_port, uint64_t cut_after_bytes);
  ~CuttingProxy();
  CuttingProxy(const CuttingProxy&) = delete;
  CuttingProxy& operator=(const CuttingProxy&) = delete;

  uint16_t port() const { return port_; }
  uint64_t bytes_to_client() const { return bytes_to_client_; }  // headers and bodies
  uint64_t cuts() const { return cuts_; }
  uint64_t connections() const { return connections_; }

 private:
  void accept_loop();
  void relay(int client, int server);
  uint16_t target_port_;
  uint64_t cut_after_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> bytes_to_client_{0};
  std::atomic<uint64_t> cuts_{0};
  std::atomic<uint64_t> connections_{0};
  std::mutex mutex_;
  std::vector<std::thread> relays_;
  std::thread acceptor_;
};

}  // namespace stoa::bench
