// Length-prefixed binary frames over TCP with deadlines: what pipeline stages talk over
// (docs/design/pipeline.md). A frame is an 8-byte little-endian length and that many bytes.
// Every wait has a deadline and every frame a size bound, so a silent or hostile peer costs a
// clear kNetwork error (naming the peer and what was awaited), never a hang or an allocation
// of its choosing.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace stoa::net {

using Deadline = std::chrono::milliseconds;

class FrameSocket {
 public:
  // Connects to host:port (a numeric address or a name) within `deadline`.
  static FrameSocket connect(const std::string& host, int port, Deadline deadline);
  FrameSocket() = default;
  FrameSocket(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  FrameSocket(FrameSocket&& other) noexcept;
  FrameSocket& operator=(FrameSocket&& other) noexcept;
  FrameSocket(const FrameSocket&) = delete;
  FrameSocket& operator=(const FrameSocket&) = delete;
  ~FrameSocket();

  bool open() const { return fd_ >= 0; }
  const std::string& peer() const { return peer_; }
  // One frame out, whole, within `deadline`.
  void send(std::span<const uint8_t> frame, Deadline deadline);
  // The next frame, within `deadline`; kNetwork for a frame over `max_bytes`, a closed
  // connection or a timeout.
  std::vector<uint8_t> receive(Deadline deadline, uint64_t max_bytes);
  // Whether bytes (or the end of the stream) can be read within `deadline`; false on timeout.
  bool wait_readable(Deadline deadline);
  // Ends both directions: a receive blocked in another thread returns with an error.
  void shutdown();
  void close();

 private:
  void write_all(const uint8_t* data, size_t n, std::chrono::steady_clock::time_point until);
  void read_all(uint8_t* data, size_t n, std::chrono::steady_clock::time_point until,
                const char* what);
  int fd_ = -1;
  std::string peer_;
};

class FrameListener {
 public:
  // Binds host:port (port 0: any free port) and listens.
  FrameListener(const std::string& host, int port);
  ~FrameListener();
  FrameListener(const FrameListener&) = delete;
  FrameListener& operator=(const FrameListener&) = delete;

  int port() const { return port_; }
  // The next connection within `deadline`; kNetwork on timeout or once closed.
  FrameSocket accept(Deadline deadline);
  // Wakes a blocked accept (it fails within 100 ms) and refuses later ones; thread-safe.
  void close();

 private:
  std::atomic<bool> closed_{false};
  int fd_ = -1;
  int port_ = 0;
};

// "host:port" split (kInvalidArgument naming `what` — an option, a field — when it is not).
std::pair<std::string, int> parse_host_port(const std::string& address, const char* what);

}  // namespace stoa::net
