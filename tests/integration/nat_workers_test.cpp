// Volunteers behind home NATs on lossy, distant lines (issue 52): the hub on a public address of
// the link emulator (net/netem/), one worker behind a port-restricted NAT and one behind a
// symmetric NAT, 40-60 ms from the hub with 1 % loss, join by the join string alone and train.
// The NATs forget a connection 2 s after its last outbound packet (a cheap home router, a
// carrier-grade NAT). Then the hub stalls (SIGSTOP) for 5 s: the answers it sends on waking are
// refused at the NATs, and each worker must give up on those dead connections (its read timeout)
// and come back on new ones; training goes on. At the end the workers stop promptly: a stop
// shuts the sockets of calls still waiting on refused answers (HttpClient::cancel). Neither
// worker can be reached by the other, so the swarm's peers cannot dial them: versions still
// arrive, from the hub.
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <map>
#include <string>
#include <thread>

#include "integration/cluster.h"
#include "net/netem/netem_sockets.h"

namespace stoa::integration {
namespace {

using net::netem::EmulatedInternet;
using net::netem::HostLink;
using net::netem::NatKind;

TEST(NatWorkers, WorkersBehindForgetfulNatsOnLossyLinksKeepTraining) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  SKIP_WITHOUT_NETEM();

  net::netem::InternetOptions o;
  o.hub = HostLink::home(100, 100, 2ms);
  o.hosts.push_back(HostLink::home(50, 10, 40ms, 5ms, 0.01, NatKind::kPortRestricted));
  o.hosts.push_back(HostLink::home(50, 10, 60ms, 5ms, 0.01, NatKind::kSymmetric));
  o.nat_timeout = std::chrono::seconds(2);
  EmulatedInternet internet(o);

  RunSpec spec;
  spec.adjust = [](run::RunConfig& c) { c.server.host = EmulatedInternet::kHubIp; };
  spec.bare_workers = true;
  Cluster cluster("nat_workers", spec);
  cluster.start_hub(60s, internet.hub_netns());
  const std::string join = cluster.join_string();
  ASSERT_EQ(join.rfind(std::string("https://") + EmulatedInternet::kHubIp + ":", 0), 0u) << join;

  cluster.start_worker_joined("porter", join, internet.netns(0));
  cluster.start_worker_joined("symmetric", join, internet.netns(1));

  // Both workers' rollouts trained, across more than one of the NATs' forgetting periods. The
  // test process is outside the emulated internet (no route to the hub), so it reads the ledger;
  // the two workers are its only workers.
  const auto per_worker = [&] {
    std::map<std::string, int64_t> n;
    for (const auto& [rollout, worker] : read_ledger(cluster.ledger_path()).rollout_worker)
      ++n[worker];
    return n;
  };
  const auto each_has_more_than = [](const std::map<std::string, int64_t>& now,
                                     const std::map<std::string, int64_t>& before) {
    if (now.size() < 2) return false;
    for (const auto& [worker, n] : now)
      if (n <= (before.count(worker) ? before.at(worker) : 3)) return false;
    return true;
  };
  const bool trained = wait_until(
      [&] {
        if (!cluster.worker("porter").running() || !cluster.worker("symmetric").running())
          return true;
        return read_ledger(cluster.ledger_path()).steps >= 4 &&
               each_has_more_than(per_worker(), {});
      },
      200s);
  ASSERT_TRUE(trained) << cluster.logs();
  ASSERT_TRUE(cluster.worker("porter").running()) << cluster.logs();
  ASSERT_TRUE(cluster.worker("symmetric").running()) << cluster.logs();

  // The NATs did their part: mappings made and inbound packets refused (answers to forgotten
  // connections, and anyone dialling in), and the lines lost packets.
  for (size_t host = 0; host < internet.hosts(); ++host) {
    const auto c = internet.counters(host);
    EXPECT_GT(c.nat.mappings_made, 2u) << "host " << host;
    EXPECT_GT(c.up.bytes, 0u) << "host " << host;
    std::cout << "host " << host << ": mappings " << c.nat.mappings_made << ", refused inbound "
              << c.nat.refused_inbound << ", lost up/down " << c.up.lost << "/" << c.down.lost
              << ", bytes up/down " << c.up.bytes << "/" << c.down.bytes << "\n";
  }

  // The hub stalls (SIGSTOP) for longer than the NATs remember a quiet connection: every answer
  // in flight when it wakes is refused at the NATs. Both workers must give up on those dead
  // connections and come back on new ones; later versions and rollouts keep coming.
  const auto before = per_worker();
  cluster.hub().signal(SIGSTOP);
  std::this_thread::sleep_for(5s);
  cluster.hub().signal(SIGCONT);
  const auto woke = std::chrono::steady_clock::now();
  const int64_t step_before = read_ledger(cluster.ledger_path()).steps;
  const bool kept_going = wait_until(
      [&] {
        return read_ledger(cluster.ledger_path()).steps >= step_before + 3 &&
               each_has_more_than(per_worker(), before);
      },
      150s);
  EXPECT_TRUE(kept_going) << cluster.logs();
  const auto back_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - woke);
  std::cout << "both workers trained again " << back_after.count() << " s after the hub woke\n";
  int64_t refused = 0;
  for (size_t host = 0; host < internet.hosts(); ++host)
    refused += static_cast<int64_t>(internet.counters(host).nat.refused_inbound);
  EXPECT_GT(refused, 0) << "the stall made the NATs refuse answers to forgotten connections";
  // A stop is not held up by calls whose answers the NATs refused: the workers cancel them.
  const auto stopping = std::chrono::steady_clock::now();
  cluster.stop_all(90s);
  std::cout << "stopped in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - stopping).count()
            << " s\n";
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, 30s);
}

}  // namespace
}  // namespace stoa::integration
