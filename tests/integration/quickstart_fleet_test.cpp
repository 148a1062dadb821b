// docs/quickstart-fleet.md as a test: the hub on one "machine", a volunteer's worker on another,
// over TLS with nothing copied between them but the join string. Two network namespaces joined by
// a bridge stand for the two machines (no route to each other's loopback); the hub binds its
// bridge address, so it makes a self-signed certificate and prints a join string with its
// fingerprint; the worker joins with `stoa work --join STRING`, syncs the weights over HTTPS and
// its rollouts are trained on. A join string with another fingerprint is refused by the worker.
#include <unistd.h>

#include "integration/cluster.h"
#include "integration/machines.h"

namespace stoa::integration {
namespace {

TEST(QuickstartFleet, AWorkerOnAnotherMachineJoinsOverTlsWithTheJoinStringAlone) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  Machines machines({"hub", "w"});
  ASSERT_TRUE(machines.error.empty()) << machines.error;

  RunSpec spec;
  spec.adjust = [&](run::RunConfig& c) { c.server.host = machines.ip(0); };
  // The volunteer has the worker binary and the join string, nothing else: the run's model files
  // come from the hub, and the search task runs on the hub.
  spec.bare_workers = true;
  Cluster cluster("quickstart_fleet", spec);
  cluster.start_hub(60s, machines.ns(0));

  // TLS by default off loopback: an https URL on the bridge address, a token and a fingerprint.
  const std::string join = cluster.join_string();
  ASSERT_EQ(join.rfind("https://" + machines.ip(0) + ":", 0), 0u) << join;
  ASSERT_NE(join.find("#token="), std::string::npos) << join;
  const size_t pin_at = join.find("sha256=");
  ASSERT_NE(pin_at, std::string::npos) << join;
  EXPECT_TRUE(fs::exists(cluster.run_dir() / "tls")) << "the self-signed certificate is kept";

  cluster.start_worker_joined("volunteer", join, machines.ns(1));
  const bool trained = wait_until(
      [&] {
        if (!cluster.worker("volunteer").running()) return true;
        const LedgerView ledger = read_ledger(cluster.ledger_path());
        return ledger.steps >= 2 && !ledger.rollout_worker.empty();
      },
      180s);
  ASSERT_TRUE(trained) << cluster.logs();
  ASSERT_TRUE(cluster.worker("volunteer").running()) << cluster.logs();
  const LedgerView ledger = read_ledger(cluster.ledger_path());
  EXPECT_GE(ledger.steps, 2);
  EXPECT_GE(ledger.rollout_worker.size(), 2u) << "the volunteer's rollouts were accepted";
  EXPECT_TRUE(fs::exists(cluster.dir() / "state-volunteer" / "model" / "tokenizer.json"))
      << "the run's tokenizer came from the hub";

  // The same join string with another certificate's fingerprint: the worker refuses the hub.
  std::string forged = join;
  char& last = forged[pin_at + 7 + 63];
  last = last == '0' ? '1' : '0';
  auto& impostor = cluster.start_worker_joined("pinned-elsewhere", forged, machines.ns(1));
  const auto status = impostor.wait(90s);
  ASSERT_TRUE(status.has_value()) << "a pin mismatch must end the worker";
  EXPECT_NE(*status, 0);
  EXPECT_NE(impostor.err().find("pin mismatch"), std::string::npos) << impostor.err();

  cluster.stop_all();
}

}  // namespace
}  // namespace stoa::integration
