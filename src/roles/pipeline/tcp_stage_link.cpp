#include "roles/pipeline/tcp_stage_link.h"

#include "core/error.h"
#include "roles/pipeline/stage_relay.h"

namespace stoa::pipeline {

TcpStageLink::TcpStageLink(const std::string& host, int port, TcpStageLinkOptions options)
    : options_(options),
      socket_(options.relay_key.empty()
                  ? net::FrameSocket::connect(host, port, options.connect_deadline)
                  : join_relay(host, port, RelayRole::kDial, options.relay_key,
                               options.connect_deadline)) {}

TcpStageLink::~TcpStageLink() {
  socket_.shutdown();
}

void TcpStageLink::fail_link(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.empty()) failed_ = reason;
  }
  socket_.shutdown();
  answered_.notify_all();
  fail(ErrorKind::kNetwork, "link to ", socket_.peer(), ": ", reason);
}

uint64_t TcpStageLink::send(std::span<const uint8_t> frame) {
  std::lock_guard<std::mutex> lock(send_mu_);
  {
    std::lock_guard<std::mutex> state(mu_);
    STOA_CHECK(failed_.empty(), ErrorKind::kNetwork, "link to ", socket_.peer(), ": ", failed_);
  }
  try {
    socket_.send(frame, options_.answer_deadline);
  } catch (const Error& e) {
    fail_link(e.what());
  }
  return next_ticket_++;
}

std::vector<uint8_t> TcpStageLink::await(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    STOA_CHECK(failed_.empty(), ErrorKind::kNetwork, "link to ", socket_.peer(), ": ", failed_);
    if (auto it = answers_.find(ticket); it != answers_.end()) {
      std::vector<uint8_t> answer = std::move(it->second);
      answers_.erase(it);
      return answer;
    }
    if (!reading_ && next_answer_ <= ticket) {
      // This waiter reads the next answer (whoever's it is) while the others wait.
      reading_ = true;
      lock.unlock();
      std::vector<uint8_t> answer;
      try {
        answer = socket_.receive(options_.answer_deadline, options_.max_frame_bytes);
      } catch (const Error& e) {
        {
          std::lock_guard<std::mutex> relock(mu_);
          reading_ = false;
        }
        fail_link(e.what());
      }
      lock.lock();
      reading_ = false;
      answers_.emplace(next_answer_++, std::move(answer));
      answered_.notify_all();
      continue;
    }
    answered_.wait(lock);
  }
}

}  // namespace stoa::pipeline
