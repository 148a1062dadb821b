// A pipeline stage as a server (docs/design/pipeline.md): it listens for the stage before it
// (the head, or the previous stage), connects to the stage after it, and runs frames through
// its PipelineStage as they come — a pass is computed and handed down at once, without waiting
// for the answer of the one before, so the stage works while the frames it sent are down the
// chain. Answers go back up in the order the frames came (answers of its own, such as an
// error, wait their turn behind forwarded ones).
//
// One upstream session at a time. A session ends when either neighbour's connection fails or
// falls silent past the deadline; the stage then drops every sequence (the head rebuilds the
// pipeline and opens them again) and waits for the next session.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/pipeline_stage.h"
#include "net/frame_socket.h"

namespace stoa::pipeline {

struct StageServerOptions {
  std::string listen_host = "127.0.0.1";
  int listen_port = 0;    // 0: any free port (port())
  std::string next_host;  // empty on the last stage
  int next_port = 0;
  // How long the upstream may stay silent within a session (a head between rollouts), and
  // how long an answer from downstream may take.
  std::chrono::milliseconds idle_deadline{600000};
  std::chrono::milliseconds answer_deadline{120000};
  uint64_t max_frame_bytes = 1ull << 30;
  // Behind NAT (stage_relay.h): with a key, the stage does not listen but dials the relay at
  // relay_host:relay_port and serves whoever joins the key from the other side, a new join per
  // session; with next_relay_key, next_host:next_port is a relay reached under that key.
  std::string relay_host;
  int relay_port = 0;
  std::string relay_key;
  std::string next_relay_key;
};

struct StageServerCounters {
  int64_t sessions = 0;
  int64_t frames = 0;
  int64_t bytes_in = 0;         // from upstream
  int64_t bytes_down = 0;       // to downstream
  int64_t bytes_from_next = 0;  // the answers downstream sent back
  // Sessions the next stage failed: it stalled past the deadline while owing an answer, dropped
  // the link, or could not be reached (not counted when this side ended the session). In a
  // group the hub formed, the member reports it: the stage before a stalled or dead one sees it
  // first (pipeline_groups.h).
  int64_t next_failures = 0;
};

class StageServer {
 public:
  // Starts listening and serving on a thread of its own.
  StageServer(std::unique_ptr<engine::PipelineStage> stage, StageServerOptions options);
  ~StageServer();  // stop()
  StageServer(const StageServer&) = delete;
  StageServer& operator=(const StageServer&) = delete;

  int port() const { return listener_ ? listener_->port() : 0; }  // 0 behind a relay
  StageServerCounters counters() const;
  // Ends the current session and stops serving; idempotent.
  void stop();
  // Ends the current session (as if a neighbour died); the server waits for the next one.
  void drop_session();

 private:
  void serve();
  void session(net::FrameSocket upstream);
  net::FrameSocket next_upstream();  // accepted, or paired at the relay

  std::unique_ptr<engine::PipelineStage> stage_;
  StageServerOptions options_;
  std::unique_ptr<net::FrameListener> listener_;  // null behind a relay
  std::atomic<bool> stopping_{false};
  std::mutex session_mu_;                 // the current session's sockets, for drop_session()
  net::FrameSocket* upstream_ = nullptr;  // (or the relay join being waited on)
  net::FrameSocket* downstream_ = nullptr;
  std::atomic<int64_t> sessions_{0}, frames_{0}, bytes_in_{0}, bytes_down_{0}, bytes_from_next_{0},
      next_failures_{0};
  std::thread thread_;
};

}  // namespace stoa::pipeline
