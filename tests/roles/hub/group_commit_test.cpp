// The ledger's group commit (ledger_writer.h): concurrent writes share transactions, every
// rollout answered "accepted" is in the ledger after the hub process is killed with SIGKILL, and a
// full write queue is answered 503 with Retry-After.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include <atomic>
#include <cstdio>
#include <set>
#include <thread>
#include <vector>

#include "roles/hub/hub_fixture.h"

namespace stoa::hub::testing {
namespace {

class GroupCommit : public HubFixture {
 protected:
  // A hub with version 1 and room for every group, and the one worker that leases them all
  // before it submits.
  std::string open_for_one_worker() {
    config.max_open_groups = 1000;
    config.lease_caps.per_worker = 0;
    open_hub();
    publish(1);
    return join();
  }
  // `groups` leased groups of G = 2, each answered with G valid rollouts (not yet submitted).
  std::vector<net::RolloutSubmission> leased_rollouts(const std::string& worker, int groups) {
    std::vector<net::RolloutSubmission> subs;
    for (int g = 0; g < groups; ++g) {
      auto l = *hub->lease(worker).lease;
      for (int i = 0; i < l.samples; ++i)
        subs.push_back(rollout(worker, l, "<answer>migraine</answer>", 1));
    }
    return subs;
  }
};

// Submits subs[i] for every i = t (mod threads) on thread t; on_accepted(id) per acceptance.
template <typename OnAccepted>
void submit_concurrently(Hub& hub, const std::string& worker,
                         const std::vector<net::RolloutSubmission>& subs, int threads,
                         OnAccepted on_accepted) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < subs.size(); i += static_cast<size_t>(threads)) {
        if (hub.submit(worker, subs[i]).status == net::IntakeStatus::kAccepted)
          on_accepted(subs[i].id);
      }
    });
  }
  for (auto& th : pool) th.join();
}

TEST_F(GroupCommit, ConcurrentSubmissionsShareTransactions) {
  const auto w = open_for_one_worker();
  const auto subs = leased_rollouts(w, 24);
  const auto before = hub->counters();
  std::atomic<int> accepted{0};
  submit_concurrently(*hub, w, subs, 12, [&](const std::string&) { ++accepted; });
  const auto after = hub->counters();
  ASSERT_EQ(accepted.load(), static_cast<int>(subs.size()));
  const double commits = after.at("ledger_commits") - before.at("ledger_commits");
  const double writes = after.at("ledger_writes") - before.at("ledger_writes");
  std::printf("group commit: %zu rollouts from 12 threads in %.0f transactions (largest %.0f)\n",
              subs.size(), commits, after.at("ledger_largest_commit"));
  EXPECT_EQ(writes, static_cast<double>(subs.size()));  // one atomic write per rollout
  EXPECT_LT(commits, static_cast<double>(subs.size())) << "no two rollouts shared an fsync";
  EXPECT_EQ(after.at("ledger_writes_pending"), 0);
  // Durable, and the trainer sees every group exactly once after a restart.
  open_hub();
  EXPECT_EQ(hub->counters()["rollouts_accepted"], static_cast<double>(subs.size()));
  EXPECT_EQ(hub->take_groups(1000, std::chrono::milliseconds(0)).size(), 24u);
}

TEST_F(GroupCommit, EveryAcceptedRolloutSurvivesSigkillOfTheHub) {
  const auto w = open_for_one_worker();
  const auto subs = leased_rollouts(w, 100);  // 200 rollouts
  hub.reset();                                // the child process is the hub from here on
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The hub process: 8 clients submit at once; every "accepted" goes to the parent at once.
    ::close(pipe_fds[0]);
    try {
      Hub h(config, deps());
      submit_concurrently(h, w, subs, 8, [&](const std::string& id) {
        const std::string line = id + "\n";  // < PIPE_BUF: one atomic write
        if (::write(pipe_fds[1], line.data(), line.size()) < 0) ::_exit(3);
      });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      ::_exit(2);
    }
    ::close(pipe_fds[1]);  // all answered (the parent was slow to kill): wait for the SIGKILL
    for (;;) ::pause();
  }
  ::close(pipe_fds[1]);
  // Kill it once 40 acceptances arrived, while the other submissions are in flight; keep every
  // id that was acknowledged before the kill (still in the pipe).
  std::set<std::string> acked;
  std::string buffer;
  bool killed = false;
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(pipe_fds[0], chunk, sizeof(chunk));
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1))
      acked.insert(buffer.substr(0, nl));
    if (!killed && acked.size() >= 40) {
      ::kill(child, SIGKILL);
      killed = true;
    }
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(killed) << "the child exited (status " << status << ") before 40 acceptances";
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  EXPECT_LT(acked.size(), subs.size()) << "every submission finished before the kill";
  {
    Ledger ledger(config.ledger_path);
    for (const auto& id : acked) EXPECT_TRUE(ledger.rollout(id).has_value()) << id;
  }
  // The restarted hub is consistent with its ledger: what it counts is what was committed, and
  // the rest of the submissions can still be made (none is refused as a duplicate or a mismatch).
  open_hub();
  const auto committed = static_cast<size_t>(hub->counters()["rollouts_accepted"]);
  EXPECT_GE(committed, acked.size());
  size_t accepted_now = 0;
  for (const auto& s : subs) {
    const auto r = hub->submit(w, s);
    ASSERT_NE(r.status, net::IntakeStatus::kRejected) << r.reason << ": " << r.detail;
    accepted_now += r.status == net::IntakeStatus::kAccepted;
  }
  EXPECT_EQ(committed + accepted_now, subs.size());
  EXPECT_EQ(hub->take_groups(1000, std::chrono::milliseconds(0)).size(), 100u);
}

TEST_F(GroupCommit, AFullWriteQueueIsAnswered503WithRetryAfter) {
  config.max_pending_writes = 2;
  open_hub();
  publish(1);
  const auto w = join();
  const auto subs = leased_rollouts(w, 1);
  // Another connection holds the ledger's write lock: the group commit cannot proceed (as when
  // the disk falls behind), so the writes of the two submissions stay queued.
  sqlite3* blocker = nullptr;
  ASSERT_EQ(sqlite3_open(config.ledger_path.c_str(), &blocker), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(blocker, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::atomic<int> accepted{0};
  std::thread submitters(
      [&] { submit_concurrently(*hub, w, subs, 2, [&](const std::string&) { ++accepted; }); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (hub->counters()["ledger_writes_pending"] < 2 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(hub->counters()["ledger_writes_pending"], 2);
  EXPECT_EQ(accepted.load(), 0) << "answered before its write was committed";
  try {
    hub->lease(w);
    ADD_FAILURE() << "a lease was handed out with the write queue full";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 503) << e.what();
    EXPECT_GT(e.retry_after_ms(), 0);
  }
  sqlite3_exec(blocker, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(blocker);
  submitters.join();
  EXPECT_EQ(accepted.load(), 2);
  EXPECT_EQ(hub->counters()["ledger_busy"], 1);
  EXPECT_TRUE(hub->lease(w).lease.has_value()) << "the queue drained: leasing goes on";
}

}  // namespace
}  // namespace stoa::hub::testing
