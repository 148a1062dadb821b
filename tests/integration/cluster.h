// The multi-process test harness: the built `stoa` binary (STOA_BINARY) run as real child
// processes — `stoa run` (hub + trainer) and `stoa work` workers — over loopback, on a tiny
// PaperSearchQA-mini, BM25 index, BPE tokenizer and tiny-lfm2 model built once per test binary.
// Children are killed with SIGKILL if the test process dies (PR_SET_PDEATHSIG), so a failed
// test never leaves a hub behind.
#pragma once
#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/process.h"
#include "model/config.h"
#include "net/http_client.h"
#include "roles/run/run_config.h"
#include "support/file_text.h"

namespace stoa::integration {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string stoa_binary();
using stoa::testing::read_text;
// The last line of `text` that parses as a JSON object ({} if none): `stoa run` prints its
// summary there on a clean exit.
nlohmann::json last_json_line(const std::string& text);

// The tiny dataset / index / model shared by every test of this binary (built on first use).
struct Assets {
  fs::path root;   // a temp dir, removed at exit
  fs::path data;   // train.jsonl, ..., index/
  fs::path model;  // config.json, model.safetensors, tokenizer.json (vocab 512 = model vocab)
};
const Assets& assets();
// True when the binary has `stoa run` (a torch-ON build); tests GTEST_SKIP otherwise.
bool have_stoa_run();

// One child process with stdout and stderr in files.
class Process {
 public:
  // netns: run inside network namespace /run/netns/<netns> ("" = this one).
  Process(const std::vector<std::string>& args, const fs::path& log_prefix,
          const std::string& netns = "");
  ~Process();  // SIGKILL + reap if still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return child_.pid(); }
  bool running();
  void signal(int sig);
  // Waits for the exit; the exit status (128 + signal when killed), nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  std::string out() const { return read_text(prefix_.string() + ".out"); }
  std::string err() const { return read_text(prefix_.string() + ".err"); }

 private:
  stoa::Process child_;  // core/process.h: own process group, PR_SET_PDEATHSIG
  fs::path prefix_;
};

// What a test's run.toml differs in (everything small and fast by default).
struct RunSpec {
  int port = 0;
  int group_size = 2;
  int lease_ttl_s = 30;
  int max_new_tokens = 12;
  int max_turns = 2;
  int groups_per_step = 2;
  int gather_timeout_ms = 500;
  int max_staleness = 4;
  int anchor_every = 4;
  int keep_anchors = 2;
  // Workers as a volunteer starts them: nothing but how to reach the hub — no --model (the run's
  // files come from the hub) and no task options (the task runs through the hub).
  bool bare_workers = false;
  std::function<void(run::RunConfig&)> adjust;  // any other setting, applied last
};

// The reference environment of docs/environment-protocol.md (envs/arithmetic/arithmetic_env.py)
// for a test: its data made in <dir>/data (64 train, 8 validation problems), then served on `port`
// (0: any free one) inside network namespace `netns` ("" = this one). Throws, quoting the
// environment's log, when either fails; the server is killed with the object.
class ArithmeticEnv {
 public:
  explicit ArithmeticEnv(const fs::path& dir, int port = 0, const std::string& netns = "");
  int port() const { return port_; }
  fs::path data() const { return dir_ / "data"; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  fs::path dir_;
  std::unique_ptr<stoa::Process> server_;
  int port_ = 0;
};

// A loopback TCP port free right now (a hub restarted on it keeps its URL); 0 if none.
int free_port();
// The worker's weight switches logged from byte `from` on ("generating with version N", with
// " (anchor)" when the switch loaded a full anchor): version -> anchor?, in log order.
std::vector<std::pair<uint64_t, bool>> weight_switches(const std::string& log, size_t from = 0);

// The rollouts /v1/status says worker `name` had accepted (0 when it is not listed).
double worker_accepted(const nlohmann::json& status, const std::string& name);

// The pipeline tests' run: the hub replays every rollout on its whole model (no peer checks).
RunSpec every_rollout_replayed_by_hub();

// A hub client for a member the test plays: few, quick retries.
net::HttpClientOptions quick_hub_client();

// Memory for a two-stage group of the test model: `member_cap_mb`, a `--max-memory` (MB) that
// holds either span but not the whole model, and `last_stage_memory`, what a member the test
// plays says it holds so that the hub (largest span to largest memory) makes it stage 1.
struct TwoStageMemory {
  std::string member_cap_mb;
  uint64_t last_stage_memory = 0;
};
TwoStageMemory two_stage_memory(const ModelConfig& config);

// Polls `pred` every 100 ms until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// A run directory with its run.toml, the `stoa run` process and its workers.
class Cluster {
 public:
  static constexpr const char* kToken = "it-join-token";

  Cluster(const std::string& name, const RunSpec& spec);
  ~Cluster();

  // Starts `stoa run` (`alone`: `stoa hub`, the hub without its trainer) and waits for
  // <run>/hub.json naming this process; returns the URL.
  std::string start_hub(std::chrono::milliseconds timeout = 60s, const std::string& netns = "",
                        bool alone = false);
  // The trainer join string `stoa hub` printed (hub.json's "trainer_join").
  const std::string& trainer_join_string() const { return trainer_join_; }
  // `stoa train --config <config> --hub <hub>` (default config: the cluster's run.toml) and
  // `extra` (e.g. --nproc 2).
  Process& start_trainer(const std::string& hub, const std::string& netns = "",
                         const fs::path& config = {}, const std::vector<std::string>& extra = {});
  Process& trainer() { return *trainer_; }
  void kill_trainer();  // SIGKILL + reap
  // The join string the hub printed (hub.json's "join": URL#token=...&sha256=...).
  const std::string& join_string() const { return join_; }
  Process& hub() { return *hub_; }
  void kill_hub();  // SIGKILL + reap
  // Starts a worker named `name` (state dir <dir>/<name>); `url` overrides the hub URL.
  Process& start_worker(const std::string& name, const std::string& url = "",
                        const std::vector<std::string>& extra = {},
                        const std::string& token = kToken);
  // A worker that joins the way a volunteer does: `stoa work --join STRING` (URL, token, pin).
  Process& start_worker_joined(const std::string& name, const std::string& join,
                               const std::string& netns = "");
  Process& worker(const std::string& name) { return *workers_.at(name); }
  void kill_worker(const std::string& name);  // SIGKILL + reap

  const std::string& url() const { return url_; }
  int port() const { return port_; }
  const fs::path& dir() const { return dir_; }
  fs::path run_dir() const { return dir_ / "run"; }
  fs::path ledger_path() const { return run_dir() / "ledger.sqlite"; }

  // GET <url><path> (JSON); nullopt when the hub does not answer.
  std::optional<nlohmann::json> get_json(const std::string& path) const;
  nlohmann::json status() const;  // {} when unreachable
  std::string metrics() const;
  // The worker's entry in /v1/status by name (null json when absent).
  nlohmann::json worker_status(const std::string& name) const;
  int64_t step() const;
  int64_t counter(const std::string& key) const;

  // SIGTERM every process, expecting clean exits (status 0) within `timeout`.
  void stop_all(std::chrono::milliseconds timeout = 60s);
  // On failure: the tail of every process's stderr, for the test log.
  std::string logs() const;

 private:
  // `stoa work` with `hub` (how it finds and joins the hub), the harness's settings and `extra`.
  Process& launch_worker(const std::string& name, const std::vector<std::string>& hub,
                         const std::vector<std::string>& extra, const std::string& netns);

  fs::path dir_;
  RunSpec spec_;
  std::unique_ptr<Process> hub_;
  std::unique_ptr<Process> trainer_;
  int trainer_starts_ = 0;
  std::string trainer_join_;
  std::map<std::string, std::unique_ptr<Process>> workers_;
  std::string url_;
  std::string join_;
  int port_ = 0;
  int hub_starts_ = 0;
};

// A pipeline group of three `stoa work --stage I/3` processes formed by hand on loopback:
// <prefix>-stage2 and <prefix>-stage1 listening on free ports, <prefix>-head dialling stage 1
// with `head_extra` (e.g. --slots, --micro-batches). The stages' addresses, so a killed stage
// can be started again on its own.
struct ThreeStageGroup {
  std::string stage1, stage2;
};
ThreeStageGroup start_three_stage_group(Cluster& cluster, const std::string& prefix,
                                        const std::vector<std::string>& head_extra = {});

struct LeaseView {
  std::string id, group, worker, state;
  int64_t issued_ms = 0;
};

// A read-only view of the run ledger (SQLite), safe while the hub runs (WAL).
struct LedgerView {
  std::map<std::string, std::string> rollout_group;  // rollout id -> group id
  std::map<std::string, std::string> rollout_worker;
  std::map<std::string, int64_t> group_rollouts;    // group id -> accepted rollouts
  std::map<std::string, std::string> group_status;  // open / complete / trained / dropped
  std::map<std::string, int64_t> group_samples;     // G
  int64_t steps = 0;
  int64_t groups_in_step_reports = 0;       // Σ report.groups over the steps table
  std::vector<std::string> step_group_ids;  // every group id of every step, in step order
  int64_t leases_expired = 0;
  std::vector<LeaseView> leases;  // in issue order
  int64_t versions = 0;
};
LedgerView read_ledger(const fs::path& path);

}  // namespace stoa::integration
