// A relay for pipeline stages behind NAT (docs/design/pipeline.md, "Links and relays"): two
// stages that cannot reach each other both dial out to a reachable machine (the hub, or a peer
// with an open port) and name the same key; the relay pairs them and carries their frames both
// ways. The cost is one more link on that hop (the relay receives a frame whole before it sends
// it on) and the hop's bytes twice through the relay's own link.
//
// Handshake: a relay connection's first frame is "STRJ", a role byte (1: the stage that serves,
// 2: the one that dials it) and the key (1..64 bytes); once the other side joins, the relay sends
// both "STRP" and from then on forwards every frame as it is. Bounded: joins must come within a
// deadline, a newer join of a key and role replaces the one waiting (a stage that re-dials after
// a lost connection is not locked out by its own ghost), at most `max_waiting` connections
// wait for their pair and `max_pairs` pairs are
// carried, a key waits once per role, frames are bounded like the stages' own. Joins are read
// one at a time on the accepting thread: a connection that stays silent holds the next join up
// to the join deadline.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/frame_socket.h"

namespace stoa::pipeline {

enum class RelayRole : uint8_t { kServe = 1, kDial = 2 };

// Dials the relay at host:port and joins `key` as `role`; returns the connection once the relay
// paired it (kNetwork when it refuses or no pair comes within `deadline`).
net::FrameSocket join_relay(const std::string& host, int port, RelayRole role,
                            const std::string& key, std::chrono::milliseconds deadline);
// The same in two steps, for a caller that must be able to interrupt the wait (shutdown()).
net::FrameSocket send_relay_join(const std::string& host, int port, RelayRole role,
                                 const std::string& key, std::chrono::milliseconds deadline);
void await_relay_pair(net::FrameSocket& socket, const std::string& key,
                      std::chrono::milliseconds deadline);

struct StageRelayOptions {
  std::string listen_host = "127.0.0.1";
  int listen_port = 0;
  int64_t max_waiting = 64;
  int64_t max_pairs = 256;
  std::chrono::milliseconds join_deadline{10000};   // for a connection's join frame
  std::chrono::milliseconds idle_deadline{600000};  // a paired side silent this long ends the pair
  uint64_t max_frame_bytes = 1ull << 30;
};

struct StageRelayCounters {
  int64_t pairs = 0;
  int64_t refused = 0;
  int64_t frames = 0;
  int64_t bytes = 0;  // forwarded, both ways
};

class StageRelay {
 public:
  explicit StageRelay(StageRelayOptions options);
  ~StageRelay();  // stop()
  StageRelay(const StageRelay&) = delete;
  StageRelay& operator=(const StageRelay&) = delete;

  int port() const { return listener_.port(); }
  StageRelayCounters counters() const;
  void stop();

 private:
  struct Pair;
  void accept_loop();
  void join(net::FrameSocket socket);
  // Frames of one direction: the dialing side's to the serving side (to_serve) or back.
  void pump(Pair& pair, bool to_serve);
  void reap_locked();  // joins and forgets the pairs whose pumps both ended

  StageRelayOptions options_;
  net::FrameListener listener_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;  // what follows
  std::map<std::pair<std::string, RelayRole>, net::FrameSocket> waiting_;
  std::vector<std::shared_ptr<Pair>> pairs_;
  std::atomic<int64_t> pairs_made_{0}, refused_{0}, frames_{0}, bytes_{0};
  std::thread acceptor_;
};

}  // namespace stoa::pipeline
