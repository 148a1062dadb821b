// The one owner of a worker's background threads (roles/worker/worker_threads.h): a stop wakes a
// sleeping loop at once; a loop that calls the hub gets the grace and then its calls cancelled;
// a loop that does not call the hub is waited for; an exception skips the grace; the threads are
// joined before the owner is gone. A loop "in a hub call" here is one that runs until the hub
// client is cancelled — what a call to a dead hub does, retrying.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "net/hub_client.h"
#include "roles/worker/worker_threads.h"

namespace stoa::worker {
namespace {
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Nothing listens there and nothing is sent: the loops below only look at its cancel flag.
net::HubClient unreachable_hub() {
  return net::HubClient("http://127.0.0.1:9");
}

void wait_until_cancelled(net::HubClient& hub) {
  while (!hub.http().cancelled()) std::this_thread::sleep_for(5ms);
}

TEST(WaitForStop, EndsAtTheTimeoutOrAtTheStopWhicheverIsFirst) {
  std::stop_source never;
  EXPECT_FALSE(wait_for_stop(never.get_token(), 20ms));
  std::stop_source stopping;
  const auto started = Clock::now();
  std::jthread stopper([&] {
    std::this_thread::sleep_for(50ms);
    stopping.request_stop();
  });
  EXPECT_TRUE(wait_for_stop(stopping.get_token(), 1h));
  EXPECT_LT(Clock::now() - started, 10s);
  EXPECT_TRUE(wait_for_stop(stopping.get_token(), 1h)) << "a stop already requested";
}

TEST(WorkerThreads, AStopWakesSleepingLoopsAndCancelsNothingWhenTheyEndInTime) {
  net::HubClient hub = unreachable_hub();
  std::atomic<int> ended{0};
  const auto started = Clock::now();
  {
    WorkerThreads threads(hub);
    auto sleeper = [&ended](std::stop_token stop) {
      while (!wait_for_stop(stop, 1h)) {
      }
      ++ended;
    };
    threads.start_hub_loop(sleeper);
    threads.start_hub_loop(sleeper);
    threads.start(sleeper);
  }
  EXPECT_EQ(ended, 3) << "every thread joined before the owner is gone";
  EXPECT_LT(Clock::now() - started, WorkerThreads::kHubGrace);
  EXPECT_FALSE(hub.http().cancelled()) << "a clean stop cancels no call";
}

TEST(WorkerThreads, AHubLoopStillRunningAfterTheGraceHasItsCallsCancelled) {
  net::HubClient hub = unreachable_hub();
  WorkerThreads threads(hub, 300ms);
  threads.start_hub_loop([&hub](std::stop_token) { wait_until_cancelled(hub); });
  const auto started = Clock::now();
  threads.stop();
  const auto took = Clock::now() - started;
  EXPECT_TRUE(hub.http().cancelled());
  EXPECT_GE(took, 300ms) << "cancelled before the grace was out";
  EXPECT_LT(took, 10s);
  threads.stop();  // a second stop has nothing left to do
}

TEST(WorkerThreads, ALoopThatDoesNotCallTheHubIsWaitedForWithoutCancelling) {
  net::HubClient hub = unreachable_hub();
  std::atomic<bool> finished_its_work{false};
  WorkerThreads threads(hub, 50ms);
  threads.start([&finished_its_work](std::stop_token stop) {
    wait_for_stop(stop, 1h);
    std::this_thread::sleep_for(300ms);  // a replay finishing after the stop
    finished_its_work = true;
  });
  threads.stop();
  EXPECT_TRUE(finished_its_work);
  EXPECT_FALSE(hub.http().cancelled());
}

TEST(WorkerThreads, LeftByAnExceptionTheCallsAreCancelledWithoutTheGrace) {
  net::HubClient hub = unreachable_hub();
  const auto started = Clock::now();
  try {
    WorkerThreads threads(hub, 1h);
    threads.start_hub_loop([&hub](std::stop_token) { wait_until_cancelled(hub); });
    throw std::runtime_error("the rollout loop failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(hub.http().cancelled());
  EXPECT_LT(Clock::now() - started, 10s);
}

}  // namespace
}  // namespace stoa::worker
