// The background threads of one worker role (the weight sync, the heartbeat, the peer checks, the
// progress report), owned by one object and stopped together. Each thread is a loop that takes a
// std::stop_token and sleeps only through wait_for_stop, so a request to stop wakes it at once.
//
// Stopping: every thread is asked to stop; the loops that call the hub (`start_hub_loop`) get
// `hub_grace` to end on their own — a live hub answers the sync's long-poll within its 5 s, so a
// clean stop cancels nothing and logs no cancelled calls —; past that the hub is taken to be dead
// (its calls would sit in their retries) and the hub client's calls in flight are cancelled. Then
// every thread is joined. Left by an exception nobody waits for an answer: the calls are
// cancelled at once.
//
// Declare the owner after everything its threads read (the gauges, the weight sync, the lease
// book): it is destroyed, and its threads joined, before they go.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "net/hub_client.h"

namespace stoa::worker {

// Sleeps for `duration` or until `stop` is requested, whichever comes first; true when stopped.
bool wait_for_stop(const std::stop_token& stop, std::chrono::milliseconds duration);

class WorkerThreads {
 public:
  // The sync's long-poll (5 s) with room to spare.
  static constexpr std::chrono::milliseconds kHubGrace{6500};

  WorkerThreads(net::HubClient& hub, std::chrono::milliseconds hub_grace = kHubGrace);
  ~WorkerThreads();
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;

  using Loop = std::function<void(std::stop_token)>;
  // A loop that calls the hub: a stop waits up to the grace for it, then cancels its call.
  void start_hub_loop(Loop loop);
  // A loop a stop waits for as long as it takes (a peer check finishing its replay).
  void start(Loop loop);

  // Asks every thread to stop, waits out the grace for the hub loops, cancels the hub's calls in
  // flight if one is still running, joins. Call it where the order matters (before what the
  // threads report on is read); the destructor does it otherwise. Idempotent.
  void stop();

 private:
  void stop_within(std::chrono::milliseconds hub_grace);

  net::HubClient& hub_;
  const std::chrono::milliseconds hub_grace_;
  const int uncaught_at_start_;  // an exception newer than the owner: stop without a grace
  std::mutex mutex_;
  std::condition_variable hub_loop_ended_;
  int hub_loops_running_ = 0;
  std::vector<std::jthread> threads_;
};

}  // namespace stoa::worker
