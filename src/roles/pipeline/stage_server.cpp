#include "roles/pipeline/stage_server.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "roles/pipeline/stage_relay.h"

namespace stoa::pipeline {
namespace {

// The answers of one session, in the order their frames came: filled at once for the stage's
// own answers, when the downstream answer arrives for forwarded ones.
class AnswerQueue {
 public:
  size_t push_own(std::vector<uint8_t> answer) {
    std::lock_guard<std::mutex> lock(mu_);
    slots_.push_back(std::move(answer));
    changed_.notify_all();
    return slots_.size();
  }
  void push_forwarded() {
    std::lock_guard<std::mutex> lock(mu_);
    forwarded_.push_back(first_ + slots_.size());
    slots_.emplace_back();
  }
  // The downstream answer of the oldest forwarded frame.
  void fill_forwarded(std::vector<uint8_t> answer) {
    std::lock_guard<std::mutex> lock(mu_);
    STOA_CHECK(!forwarded_.empty(), ErrorKind::kNetwork, "the next stage answered a frame",
               " it was never sent");
    slots_[forwarded_.front() - first_] = std::move(answer);
    forwarded_.pop_front();
    changed_.notify_all();
  }
  // The next answer in order, or nothing once closed.
  std::optional<std::vector<uint8_t>> next() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return closed_ || (!slots_.empty() && slots_.front()); });
    if (closed_) return std::nullopt;
    std::vector<uint8_t> out = std::move(*slots_.front());
    slots_.pop_front();
    ++first_;
    return out;
  }
  bool waiting_downstream() {
    std::lock_guard<std::mutex> lock(mu_);
    return !forwarded_.empty();
  }
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::optional<std::vector<uint8_t>>> slots_;
  std::deque<size_t> forwarded_;  // absolute indices of slots awaiting downstream
  size_t first_ = 0;              // absolute index of slots_.front()
  bool closed_ = false;
};

}  // namespace

StageServer::StageServer(std::unique_ptr<engine::PipelineStage> stage, StageServerOptions options)
    : stage_(std::move(stage)), options_(std::move(options)) {
  if (options_.relay_key.empty())
    listener_ = std::make_unique<net::FrameListener>(options_.listen_host, options_.listen_port);
  const bool last = stage_->span().heads(stage_->runner().config());
  STOA_CHECK(last == options_.next_host.empty(), ErrorKind::kInvalidArgument,
             last ? "the last stage has no next stage to connect to"
                  : "a stage before the last needs the next stage's address");
  thread_ = std::thread([this] { serve(); });
}

StageServer::~StageServer() {
  stop();
}

StageServerCounters StageServer::counters() const {
  return {sessions_.load(),   frames_.load(),          bytes_in_.load(),
          bytes_down_.load(), bytes_from_next_.load(), next_failures_.load()};
}

void StageServer::stop() {
  stopping_ = true;
  if (listener_) listener_->close();
  drop_session();
  if (thread_.joinable()) thread_.join();
}

void StageServer::drop_session() {
  std::lock_guard<std::mutex> lock(session_mu_);
  if (upstream_ != nullptr) upstream_->shutdown();
  if (downstream_ != nullptr) downstream_->shutdown();
}

void StageServer::serve() {
  while (!stopping_) {
    try {
      session(next_upstream());
    } catch (const Error& e) {
      if (!stopping_) log_warn("stage", "session ended: ", e.what());
    }
    stage_->reset();
  }
}

net::FrameSocket StageServer::next_upstream() {
  if (listener_) return listener_->accept(std::chrono::hours(24));
  net::FrameSocket joining =
      send_relay_join(options_.relay_host, options_.relay_port, RelayRole::kServe,
                      options_.relay_key, std::chrono::milliseconds(10000));
  {
    std::lock_guard<std::mutex> lock(session_mu_);
    upstream_ = &joining;  // so stop() can end the wait
  }
  try {
    if (!stopping_) await_relay_pair(joining, options_.relay_key, std::chrono::hours(24));
  } catch (const Error&) {
    std::lock_guard<std::mutex> lock(session_mu_);
    upstream_ = nullptr;
    throw;
  }
  std::lock_guard<std::mutex> lock(session_mu_);
  upstream_ = nullptr;
  STOA_CHECK(!stopping_, ErrorKind::kNetwork, "stopping");
  return joining;
}

void StageServer::session(net::FrameSocket upstream) {
  ++sessions_;
  net::FrameSocket downstream;
  if (!options_.next_host.empty()) {
    try {
      downstream = options_.next_relay_key.empty()
                       ? net::FrameSocket::connect(options_.next_host, options_.next_port,
                                                   std::chrono::milliseconds(10000))
                       : join_relay(options_.next_host, options_.next_port, RelayRole::kDial,
                                    options_.next_relay_key, std::chrono::milliseconds(10000));
    } catch (const Error&) {
      if (!stopping_) ++next_failures_;  // the next stage cannot be reached
      throw;
    }
  }
  {
    std::lock_guard<std::mutex> lock(session_mu_);
    upstream_ = &upstream;
    downstream_ = downstream.open() ? &downstream : nullptr;
  }
  AnswerQueue answers;
  std::atomic<bool> ending{false};
  // The reader and the forwarding loop can both see the same dead next stage (a closed socket
  // read on one, a broken pipe written on the other): one lost next stage counts once.
  std::atomic<bool> next_failure_counted{false};
  auto count_next_failure = [&] {
    if (!ending && !stopping_ && !next_failure_counted.exchange(true)) ++next_failures_;
  };
  auto end_session = [&] {
    ending = true;
    answers.close();
    upstream.shutdown();
    if (downstream.open()) downstream.shutdown();
  };
  // Answers go up in order on their own thread; downstream answers are read on another.
  std::thread writer([&] {
    try {
      while (std::optional<std::vector<uint8_t>> a = answers.next())
        upstream.send(*a, options_.answer_deadline);
    } catch (const Error& e) {
      if (!ending) log_warn("stage", "answering ", upstream.peer(), " failed: ", e.what());
    }
    end_session();
  });
  std::thread reader;
  if (downstream.open()) {
    reader = std::thread([&] {
      try {
        while (!ending) {
          // A silent next stage is a fault only while it owes an answer (a stall).
          if (!downstream.wait_readable(options_.answer_deadline)) {
            STOA_CHECK(!answers.waiting_downstream(), ErrorKind::kNetwork, "no answer within ",
                       options_.answer_deadline.count(), " ms (a stalled stage)");
            continue;
          }
          std::vector<uint8_t> answer =
              downstream.receive(options_.answer_deadline, options_.max_frame_bytes);
          bytes_from_next_ += static_cast<int64_t>(answer.size());
          answers.fill_forwarded(std::move(answer));
        }
      } catch (const Error& e) {
        if (!ending && !stopping_) {
          count_next_failure();
          log_warn("stage", "the next stage ", downstream.peer(), ": ", e.what());
        }
      }
      end_session();
    });
  }
  try {
    while (!ending) {
      std::vector<uint8_t> frame =
          upstream.receive(options_.idle_deadline, options_.max_frame_bytes);
      ++frames_;
      bytes_in_ += static_cast<int64_t>(frame.size());
      engine::StageOutcome outcome = stage_->process(frame);
      if (!outcome.forward) {
        answers.push_own(std::move(outcome.bytes));
        continue;
      }
      answers.push_forwarded();
      bytes_down_ += static_cast<int64_t>(outcome.bytes.size());
      try {
        downstream.send(outcome.bytes, options_.answer_deadline);
      } catch (const Error&) {
        count_next_failure();
        throw;
      }
    }
  } catch (const Error& e) {
    if (!ending && !stopping_) log_info("stage", "upstream ", upstream.peer(), ": ", e.what());
  }
  end_session();
  writer.join();
  if (reader.joinable()) reader.join();
  std::lock_guard<std::mutex> lock(session_mu_);
  upstream_ = nullptr;
  downstream_ = nullptr;
}

}  // namespace stoa::pipeline
