// What micro-batches buy a pipeline group in a real run (docs/design/pipeline.md, "Micro-batches
// in a run", measured): `stoa run` and a group of four `stoa work --stage I/4` processes on
// tiny-lfm2, the head with S slots as one micro-batch (M = 1) or as K = 4 (M = 4), once with
// direct loopback hops and once with every hop through the benches' delaying proxy
// (net/link_proxy.h: 20 ms each way, a 40 ms round trip per hop; the emulator of net/netem is
// not wired into runs). Tokens/s is the head's tokens_generated on the hub's status over a
// window after a warm-up; each row prints the load average. Slow: four runs of about a minute.
// It fails when a configuration generates nothing, or when M = 4 is not faster than M = 1 on
// the linked pipeline (where a lone micro-batch leaves every stage idle for most of a round trip,
// and its refills stop every rollout for theirs).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "integration/cluster.h"
#include "net/link_proxy.h"

namespace stoa::integration {
namespace {

constexpr int kStages = 4;
// The head's slots: STOA_PIPELINE_BENCH_SLOTS, 32 unless set.
int slots() {
  const char* env = std::getenv("STOA_PIPELINE_BENCH_SLOTS");
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 32;
}
constexpr auto kWarmup = 15s;
constexpr auto kWindow = 40s;

double head_tokens(Cluster& c) {
  const nlohmann::json w = c.worker_status("t-head");
  return w.is_null() ? 0 : w.value("tokens_generated", 0.0);
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  double one = 0;
  f >> one;
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", one);
  return text;
}

struct Row {
  double tokens_per_s = 0;
  std::string load_before, load_after;
};

// One run: the group's stages, each hop direct or through a proxy with `rtt_ms` per hop.
Row measure(int micro_batches, int rtt_ms) {
  RunSpec spec;
  spec.group_size = 4;
  spec.groups_per_step = 8;
  spec.max_new_tokens = 48;
  spec.max_staleness = 8;
  spec.adjust = [](run::RunConfig& rc) {
    rc.hub.verify.enabled = false;  // the hub's replays would take the stages' cores
    rc.hub.lease_caps.per_worker = 0;
    rc.hub.max_open_groups = 64;
  };
  Cluster c(
      "pipeline_throughput_m" + std::to_string(micro_batches) + "_rtt" + std::to_string(rtt_ms),
      spec);
  c.start_hub();
  // Stage i listens at ports[i]; the stage before it dials dial[i] (its proxy when linked).
  std::vector<std::unique_ptr<net::LinkProxy>> proxies;
  std::vector<std::string> listen(kStages), dial(kStages);
  for (int i = 1; i < kStages; ++i) {
    const int port = free_port();
    listen[i] = "127.0.0.1:" + std::to_string(port);
    dial[i] = listen[i];
    if (rtt_ms > 0) {
      net::LinkProxyOptions p;
      p.target_port = port;
      p.one_way_delay = std::chrono::microseconds(rtt_ms * 500);
      proxies.push_back(std::make_unique<net::LinkProxy>(p));
      dial[i] = "127.0.0.1:" + std::to_string(proxies.back()->port());
    }
  }
  const std::string k = "/" + std::to_string(kStages);
  for (int i = kStages - 1; i >= 1; --i) {
    std::vector<std::string> args = {"--stage", std::to_string(i) + k, "--stage-listen", listen[i]};
    if (i + 1 < kStages) args.insert(args.end(), {"--stage-next", dial[i + 1]});
    c.start_worker("t-stage" + std::to_string(i), "", args);
  }
  c.start_worker("t-head", "",
                 {"--stage", "0" + k, "--stage-next", dial[1], "--slots", std::to_string(slots()),
                  "--micro-batches", std::to_string(micro_batches)});
  Row row;
  EXPECT_TRUE(wait_until([&] { return head_tokens(c) > 0; }, 180s)) << c.logs();
  std::this_thread::sleep_for(kWarmup);
  row.load_before = load_average();
  const double t0 = head_tokens(c);
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(kWindow);
  const double t1 = head_tokens(c);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  row.load_after = load_average();
  row.tokens_per_s = (t1 - t0) / seconds;
  std::printf("K=%d S=%d M=%d RTT/hop=%d ms: %.1f tok/s (load %s -> %s)\n", kStages, slots(),
              micro_batches, rtt_ms, row.tokens_per_s, row.load_before.c_str(),
              row.load_after.c_str());
  std::fflush(stdout);
  c.stop_all();
  return row;
}

TEST(PipelineThroughput, MicroBatchesInARunWithAndWithoutLinks) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  const Row direct1 = measure(1, 0);
  const Row direct4 = measure(kStages, 0);
  const Row linked1 = measure(1, 40);
  const Row linked4 = measure(kStages, 40);
  for (const Row* r : {&direct1, &direct4, &linked1, &linked4}) EXPECT_GT(r->tokens_per_s, 0);
  std::printf("efficiency at 40 ms (linked / direct): M=1 %.2f, M=%d %.2f\n",
              linked1.tokens_per_s / std::max(1e-9, direct1.tokens_per_s), kStages,
              linked4.tokens_per_s / std::max(1e-9, direct4.tokens_per_s));
  EXPECT_GT(linked4.tokens_per_s, linked1.tokens_per_s);
}

}  // namespace
}  // namespace stoa::integration
