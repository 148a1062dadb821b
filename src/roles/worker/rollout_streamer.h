// Streams finished rollouts to the hub the moment they are done, from a background thread, so
// the generation loop never waits on the network. Each rollout is first written to a spool
// directory (atomically, named by its id) and removed only once the hub has answered it
// (accepted, duplicate or rejected); a worker killed or restarted mid-upload re-sends its spool
// on start, and because the id is the hub's idempotency key a rollout that did reach the hub is
// counted once. A transport failure (after the HTTP client's own retries) keeps the rollout at
// the head of the queue and backs off exponentially — it is never dropped for a network reason.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "net/protocol.h"

namespace stoa::worker {

struct StreamCounters {
  uint64_t queued = 0;
  uint64_t accepted = 0;
  uint64_t duplicate = 0;
  uint64_t rejected = 0;
  uint64_t transport_failures = 0;  // whole submit calls that failed after the client's retries
  uint64_t resumed = 0;             // rollouts found in the spool at start
  double reward_sum = 0;            // the hub's rewards of accepted rollouts
};

class RolloutStreamer {
 public:
  using Submit = std::function<net::RolloutResponse(const net::RolloutSubmission&)>;
  using OnResult = std::function<void(const net::RolloutSubmission&, const net::RolloutResponse&)>;

  // spool_dir: "" keeps nothing on disk (tests); otherwise created if missing and re-sent first.
  RolloutStreamer(Submit submit, std::string spool_dir,
                  std::chrono::milliseconds backoff_base = std::chrono::milliseconds{500},
                  std::chrono::milliseconds backoff_max = std::chrono::milliseconds{30000});
  ~RolloutStreamer();  // stop(false)
  RolloutStreamer(const RolloutStreamer&) = delete;
  RolloutStreamer& operator=(const RolloutStreamer&) = delete;

  void on_result(OnResult fn) { on_result_ = std::move(fn); }

  // Spools and queues one rollout; returns at once.
  void push(const net::RolloutSubmission& rollout);
  // Waits until the queue is empty or `timeout` passed; true when empty.
  bool flush(std::chrono::milliseconds timeout);
  // Stops the thread; with drain, first tries to flush for up to `drain_timeout`. What is left
  // stays in the spool for the next start.
  void stop(bool drain, std::chrono::milliseconds drain_timeout = std::chrono::milliseconds{0});

  size_t pending() const;
  StreamCounters counters() const;

 private:
  void run();
  void spool_write(const net::RolloutSubmission& rollout);
  void spool_remove(const std::string& id);

  Submit submit_;
  OnResult on_result_;
  std::string spool_dir_;
  std::chrono::milliseconds backoff_base_;
  std::chrono::milliseconds backoff_max_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<net::RolloutSubmission> queue_;
  bool in_flight_ = false;
  bool stopping_ = false;
  StreamCounters counters_;
  std::thread thread_;
};

}  // namespace stoa::worker
