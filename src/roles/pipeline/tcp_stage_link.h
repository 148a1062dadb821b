// The link from one pipeline stage to the next across machines (docs/design/pipeline.md): stage
// frames over one TCP connection (net/frame_socket.h), many in flight at once. Frames are
// answered in order, so a sender takes a ticket and the waiter whose ticket is next reads the
// next answer; a link that dies or stays silent past the deadline fails every waiter with the
// reason, and stays failed (the pipeline is rebuilt, never patched up mid-rollout).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/pipeline_stage.h"
#include "net/frame_socket.h"

namespace stoa::pipeline {

struct TcpStageLinkOptions {
  std::chrono::milliseconds connect_deadline{10000};
  // How long an answer may take: the slowest pass of the stages after this one, plus links.
  std::chrono::milliseconds answer_deadline{120000};
  uint64_t max_frame_bytes = 1ull << 30;
  // When set, host:port is a relay (stage_relay.h) and the next stage is joined under this key.
  std::string relay_key;
};

class TcpStageLink final : public engine::StageLink {
 public:
  TcpStageLink(const std::string& host, int port, TcpStageLinkOptions options = {});
  ~TcpStageLink() override;

  uint64_t send(std::span<const uint8_t> frame) override;
  std::vector<uint8_t> await(uint64_t ticket) override;
  const std::string& peer() const { return socket_.peer(); }

 private:
  [[noreturn]] void fail_link(const std::string& reason);
  TcpStageLinkOptions options_;
  net::FrameSocket socket_;
  std::mutex send_mu_;
  uint64_t next_ticket_ = 0;
  std::mutex mu_;  // what follows
  std::condition_variable answered_;
  uint64_t next_answer_ = 0;  // the ticket the next frame read belongs to
  bool reading_ = false;
  std::map<uint64_t, std::vector<uint8_t>> answers_;  // read, not yet awaited
  std::string failed_;
};

}  // namespace stoa::pipeline
