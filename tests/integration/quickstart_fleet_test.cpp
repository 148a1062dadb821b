// docs/quickstart-fleet.md as a test: the hub on one "machine", a volunteer's worker on another,
// over TLS with nothing copied between them but the join string. Two network namespaces joined by
// a veth pair stand for the two machines (no route to each other's loopback); the hub binds its
// veth address, so it makes a self-signed certificate and prints a join string with its
// fingerprint; the worker joins with `stoa work --join STRING`, syncs the weights over HTTPS and
// its rollouts are trained on. A join string with another fingerprint is refused by the worker.
#include <unistd.h>

#include "core/process_run.h"
#include "integration/cluster.h"

namespace stoa::integration {
namespace {

// Two namespaces and the veth pair between them; everything removed by the destructor (deleting
// a namespace deletes its end of the pair, and with it the pair).
class TwoMachines {
 public:
  TwoMachines() {
    const std::string id = std::to_string(::getpid() % 100000);
    hub_ns = "stoa-qs-" + id + "-hub";
    worker_ns = "stoa-qs-" + id + "-w";
    const int subnet = static_cast<int>(::getpid() % 200) + 20;
    hub_ip = "10.233." + std::to_string(subnet) + ".1";
    worker_ip = "10.233." + std::to_string(subnet) + ".2";
    const std::string hub_if = "qsh" + id, worker_if = "qsw" + id;
    remove();
    for (const auto& cmd : std::vector<std::vector<std::string>>{
             {"ip", "netns", "add", hub_ns},
             {"ip", "netns", "add", worker_ns},
             {"ip", "link", "add", hub_if, "type", "veth", "peer", "name", worker_if},
             {"ip", "link", "set", hub_if, "netns", hub_ns},
             {"ip", "link", "set", worker_if, "netns", worker_ns},
             {"ip", "-n", hub_ns, "addr", "add", hub_ip + "/24", "dev", hub_if},
             {"ip", "-n", worker_ns, "addr", "add", worker_ip + "/24", "dev", worker_if},
             {"ip", "-n", hub_ns, "link", "set", hub_if, "up"},
             {"ip", "-n", worker_ns, "link", "set", worker_if, "up"},
             {"ip", "-n", hub_ns, "link", "set", "lo", "up"},
             {"ip", "-n", worker_ns, "link", "set", "lo", "up"}}) {
      ProcessOptions o;
      o.out = OutputTarget::capture();
      o.err = OutputTarget::capture();
      const RunResult r = run_process(cmd, o);
      if (r.status.code != 0) {
        error = "`" + cmd[0];
        for (size_t i = 1; i < cmd.size(); ++i) error += " " + cmd[i];
        error += "` failed: " + r.err + " (this test needs root and iproute2)";
        return;
      }
    }
  }
  ~TwoMachines() { remove(); }

  std::string hub_ns, worker_ns, hub_ip, worker_ip, error;

 private:
  void remove() {
    for (const auto& ns : {hub_ns, worker_ns}) {
      ProcessOptions quiet;
      quiet.out = OutputTarget::discard();
      quiet.err = OutputTarget::discard();
      run_process({"ip", "netns", "delete", ns}, quiet);
    }
  }
};

TEST(QuickstartFleet, AWorkerOnAnotherMachineJoinsOverTlsWithTheJoinStringAlone) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  TwoMachines machines;
  ASSERT_TRUE(machines.error.empty()) << machines.error;

  RunSpec spec;
  spec.adjust = [&](run::RunConfig& c) { c.server.host = machines.hub_ip; };
  // The volunteer has the worker binary and the join string, nothing else: the run's model files
  // come from the hub, and the search task runs on the hub.
  spec.bare_workers = true;
  Cluster cluster("quickstart_fleet", spec);
  cluster.start_hub(60s, machines.hub_ns);

  // TLS by default off loopback: an https URL on the veth address, a token and a fingerprint.
  const std::string join = cluster.join_string();
  ASSERT_EQ(join.rfind("https://" + machines.hub_ip + ":", 0), 0u) << join;
  ASSERT_NE(join.find("#token="), std::string::npos) << join;
  const size_t pin_at = join.find("sha256=");
  ASSERT_NE(pin_at, std::string::npos) << join;
  EXPECT_TRUE(fs::exists(cluster.run_dir() / "tls")) << "the self-signed certificate is kept";

  cluster.start_worker_joined("volunteer", join, machines.worker_ns);
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
  auto& impostor = cluster.start_worker_joined("pinned-elsewhere", forged, machines.worker_ns);
  const auto status = impostor.wait(90s);
  ASSERT_TRUE(status.has_value()) << "a pin mismatch must end the worker";
  EXPECT_NE(*status, 0);
  EXPECT_NE(impostor.err().find("pin mismatch"), std::string::npos) << impostor.err();

  cluster.stop_all();
}

}  // namespace
}  // namespace stoa::integration
