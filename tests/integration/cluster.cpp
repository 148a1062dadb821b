#include "integration/cluster.h"

#include <algorithm>

#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "model/layer_span.h"
#include "model/memory_need.h"
#include "support/loopback_socket.h"
#include "support/source_dir.h"

namespace stoa::integration {

std::string stoa_binary() {
  const char* b = std::getenv("STOA_BINARY");
  return b && *b ? b : "stoa";
}

nlohmann::json last_json_line(const std::string& text) {
  std::istringstream in(text);
  nlohmann::json last = nlohmann::json::object();
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) last = j;
  }
  return last;
}

namespace {

// After a SIGTERM: `p` (`who`) exits within `timeout`, with status 0.
void expect_clean_exit(Process& p, std::chrono::milliseconds timeout, const std::string& who) {
  auto st = p.wait(timeout);
  EXPECT_TRUE(st.has_value()) << who << " ignored SIGTERM";
  if (st) {
    EXPECT_EQ(*st, 0) << who << " exit " << *st << "\n" << p.err();
  }
}

// Runs the binary to completion (asset building); returns the exit status.
int run_to_end(const std::vector<std::string>& args, const fs::path& log_prefix) {
  Process p(args, log_prefix);
  auto st = p.wait(std::chrono::minutes(5));
  return st ? *st : -1;
}

fs::path unique_root() {
  return fs::temp_directory_path() / ("stoa_it_" + std::to_string(::getpid()));
}

struct RootCleanup {
  fs::path root;
  ~RootCleanup() {
    std::error_code ec;
    if (!root.empty() && !std::getenv("STOA_KEEP_TEST_DIRS")) fs::remove_all(root, ec);
  }
};
RootCleanup g_cleanup;

}  // namespace

bool have_stoa_run() {
  static const bool have = [] {
    const fs::path root = unique_root();
    fs::create_directories(root);
    g_cleanup.root = root;
    // `stoa run --help` of a torch-OFF binary prints the top-level help (exit 0): look for the
    // run command's own option instead. Only a build without libtorch may lack it: a binary that
    // does not start, or a torch build without `stoa run`, is broken and throws (a test failure,
    // not a skip).
    const int status = run_to_end({"run", "--help"}, root / "probe");
    if (status != 0)
      throw std::runtime_error("`" + stoa_binary() + " run --help` exited with status " +
                               std::to_string(status) + ":\n" + read_text(root / "probe.err"));
    const bool has_run = read_text(root / "probe.out").find("--config") != std::string::npos;
    const char* torch = std::getenv("STOA_WITH_TORCH");
    if (!has_run && torch && std::string(torch) == "1")
      throw std::runtime_error("a libtorch build's `" + stoa_binary() +
                               "` has no `run` command:\n" + read_text(root / "probe.out"));
    return has_run;
  }();
  return have;
}

const Assets& assets() {
  static Assets a;
  static std::once_flag once;
  std::call_once(once, [] {
    a.root = unique_root() / "assets";
    g_cleanup.root = unique_root();
    a.data = a.root / "data";
    a.model = a.root / "model";
    fs::create_directories(a.root);
    const fs::path log = a.root / "build";
    auto must = [&](const std::vector<std::string>& args) {
      const int st = run_to_end(args, log);
      if (st != 0) {
        std::string cmd;
        for (const auto& s : args) cmd += s + " ";
        throw std::runtime_error("asset step failed (" + std::to_string(st) + "): stoa " + cmd +
                                 "\n" + read_text(log.string() + ".err"));
      }
    };
    must({"data", "generate", "--out", a.data.string(), "--papers", "300", "--questions", "80",
          "--seed", "2"});
    must({"search", "index", "--corpus", (a.data / "corpus.jsonl").string(), "--out",
          (a.data / "index").string()});
    must({"tokenizer", "train", "--corpus", (a.data / "corpus.jsonl").string(), "--vocab-size",
          "512", "--out", (a.root / "tok").string()});
    // The tokenizer copied in and its ids (EOS: <|im_end|>) written into config.json.
    must({"model", "init", "--preset", "tiny-lfm2", "--seed", "3", "--tokenizer",
          (a.root / "tok").string(), "--out", a.model.string()});
  });
  return a;
}

// ---------------------------------------------------------------- Process

Process::Process(const std::vector<std::string>& args, const fs::path& log_prefix,
                 const std::string& netns)
    : prefix_(log_prefix) {
  // STOA_WORKER_BINARY: `stoa work` from another build (scripts/test-arm64: the aarch64 worker
  // under qemu-user against this build's native hub).
  const char* worker_binary = std::getenv("STOA_WORKER_BINARY");
  const bool other_worker = !args.empty() && args[0] == "work" && worker_binary && *worker_binary;
  std::vector<std::string> argv = {other_worker ? std::string(worker_binary) : stoa_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions options;
  options.out = OutputTarget::file(log_prefix.string() + ".out");
  options.err = OutputTarget::file(log_prefix.string() + ".err");
  // The child dies with the test: no orphaned hub keeps a port or a ledger open.
  options.die_with_parent = true;
  options.netns = netns;
  child_ = stoa::Process::start(argv, options);
}

Process::~Process() = default;  // stoa::Process kills (SIGKILL) and reaps a running child

bool Process::running() {
  return child_.running();
}

void Process::signal(int sig) {
  child_.signal(sig);
}

std::optional<int> Process::wait(std::chrono::milliseconds timeout) {
  return child_.wait_for(timeout);
}

namespace {
// `python3 envs/arithmetic/arithmetic_env.py ARGS...` as a child of this test.
stoa::Process python_env(const std::vector<std::string>& args, const fs::path& log,
                         const std::string& netns) {
  const std::string python = find_executable("python3");
  if (python.empty()) throw std::runtime_error("python3 is needed (scripts/setup installs it)");
  std::vector<std::string> argv = {
      python, (test::source_dir() / "envs/arithmetic/arithmetic_env.py").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions o = logged_to(log.string(), true);
  o.die_with_parent = true;
  o.netns = netns;
  return stoa::Process::start(argv, o);
}
}  // namespace

ArithmeticEnv::ArithmeticEnv(const fs::path& dir, int port, const std::string& netns) : dir_(dir) {
  if (python_env({"data", "--out", data().string(), "--train", "64", "--val", "8"},
                 dir / "env-data.log", "")
          .wait() != 0)
    throw std::runtime_error("arithmetic_env.py data failed:\n" + read_text(dir / "env-data.log"));
  const fs::path port_file = dir / "env.port";
  fs::remove(port_file);
  server_ = std::make_unique<stoa::Process>(
      python_env({"serve", "--port", std::to_string(port), "--port-file", port_file.string()},
                 dir / "env.log", netns));
  if (!wait_until([&] { return fs::exists(port_file); }, 20s))
    throw std::runtime_error("arithmetic_env.py serve did not start:\n" +
                             read_text(dir / "env.log"));
  std::ifstream(port_file) >> port_;
  if (port_ <= 0)
    throw std::runtime_error("arithmetic_env.py wrote no port to " + port_file.string());
}

int free_port() {
  try {
    const test::LoopbackSocket bound = test::bind_loopback(/*backlog=*/0);
    ::close(bound.fd);
    return bound.port;
  } catch (const std::runtime_error&) {
    return 0;
  }
}

std::vector<std::pair<uint64_t, bool>> weight_switches(const std::string& log, size_t from) {
  static const std::string key = "generating with version ";
  std::vector<std::pair<uint64_t, bool>> out;
  for (size_t p = log.find(key, from); p != std::string::npos; p = log.find(key, p + 1)) {
    const size_t eol = log.find('\n', p);
    if (eol == std::string::npos) break;  // a line still being written
    const std::string line = log.substr(p, eol - p);
    out.emplace_back(std::stoull(line.substr(key.size())),
                     line.find("(anchor)") != std::string::npos);
  }
  return out;
}

double worker_accepted(const nlohmann::json& status, const std::string& name) {
  for (const auto& w : status.value("workers", nlohmann::json::array()))
    if (w.value("name", "") == name) return w.value("rollouts_accepted", 0.0);
  return 0;
}

RunSpec every_rollout_replayed_by_hub() {
  RunSpec spec;
  spec.adjust = [](run::RunConfig& rc) {
    rc.hub.verify.enabled = true;
    rc.hub.verify.peer = false;
    rc.hub.verify.fraction = 1.0;
  };
  return spec;
}

net::HttpClientOptions quick_hub_client() {
  net::HttpClientOptions o;
  o.max_attempts = 3;
  o.backoff_base = std::chrono::milliseconds(50);
  o.backoff_max = std::chrono::milliseconds(500);
  o.connect_timeout = std::chrono::milliseconds(1000);
  return o;
}

TwoStageMemory two_stage_memory(const ModelConfig& config) {
  const uint64_t whole = memory_needed(config).total();
  const std::vector<LayerSpan> spans = split_layers(config, 2);
  const uint64_t need0 = memory_needed(config, spans[0]).total();
  const uint64_t need1 = memory_needed(config, spans[1]).total();
  const uint64_t cap = std::max(need0, need1) + (whole - std::max(need0, need1)) / 2;
  EXPECT_LT(cap, whole);
  char cap_mb[64];
  std::snprintf(cap_mb, sizeof cap_mb, "%.6f", static_cast<double>(cap) / 1e6);
  return {cap_mb, need1 >= need0 ? whole - 1 : need1};
}

ThreeStageGroup start_three_stage_group(Cluster& cluster, const std::string& prefix,
                                        const std::vector<std::string>& head_extra) {
  ThreeStageGroup g;
  g.stage1 = "127.0.0.1:" + std::to_string(free_port());
  g.stage2 = "127.0.0.1:" + std::to_string(free_port());
  cluster.start_worker(prefix + "-stage2", "", {"--stage", "2/3", "--stage-listen", g.stage2});
  cluster.start_worker(prefix + "-stage1", "",
                       {"--stage", "1/3", "--stage-listen", g.stage1, "--stage-next", g.stage2});
  std::vector<std::string> head = {"--stage", "0/3", "--stage-next", g.stage1};
  head.insert(head.end(), head_extra.begin(), head_extra.end());
  cluster.start_worker(prefix + "-head", "", head);
  return g;
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(100ms);
  }
}

// ---------------------------------------------------------------- Cluster

Cluster::Cluster(const std::string& name, const RunSpec& spec) : spec_(spec) {
  dir_ = unique_root() / name;
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  const Assets& a = assets();
  run::RunConfig c;
  c.run_dir = (dir_ / "run").string();
  c.model_dir = a.model.string();
  c.data_dir = a.data.string();
  c.task = "search";
  c.task_options.set("index", (a.data / "index").string());
  c.hub.join_token = kToken;
  c.server.port = spec.port;
  c.server.threads = 16;
  c.hub.group_size = spec.group_size;
  c.hub.lease_ttl_ms = int64_t{spec.lease_ttl_s} * 1000;
  c.hub.heartbeat_interval_s = 2;
  c.hub.max_tokens = 400;
  c.hub.sampling.max_new_tokens = spec.max_new_tokens;
  c.hub.sampling.max_turns = spec.max_turns;
  c.hub.sampling.max_observation_tokens = 48;
  c.train.threads = 1;
  c.train.optimizer.lr = 0.001;
  c.train.schedule.warmup_steps = 0;
  c.loop.groups_per_step = static_cast<size_t>(spec.groups_per_step);
  c.loop.min_groups = 1;
  c.loop.gather_timeout = std::chrono::milliseconds(spec.gather_timeout_ms);
  c.loop.staleness.max_staleness = static_cast<uint64_t>(spec.max_staleness);
  c.loop.publisher.anchor_every = static_cast<uint64_t>(spec.anchor_every);
  c.loop.publisher.retention.keep_anchors = static_cast<size_t>(spec.keep_anchors);
  if (spec.adjust) spec.adjust(c);
  run::save_run_config(c, (dir_ / "run.toml").string());
}

Cluster::~Cluster() {
  for (auto& [n, w] : workers_) w->signal(SIGKILL);
  workers_.clear();
  hub_.reset();
}

std::string Cluster::start_hub(std::chrono::milliseconds timeout, const std::string& netns,
                               bool alone) {
  hub_.reset();
  hub_ = std::make_unique<Process>(
      std::vector<std::string>{alone ? "hub" : "run", "--config", (dir_ / "run.toml").string()},
      dir_ / ("hub" + std::to_string(++hub_starts_)), netns);
  const fs::path info = run_dir() / "hub.json";
  nlohmann::json j;
  const bool up = wait_until(
      [&] {
        if (!hub_->running()) return true;
        if (!fs::exists(info)) return false;
        j = nlohmann::json::parse(read_text(info), nullptr, false);
        return j.is_object() && j.value("pid", 0) == hub_->pid();
      },
      timeout);
  if (!up || !hub_->running())
    throw std::runtime_error("stoa run did not come up:\n" + hub_->err());
  url_ = j["url"].get<std::string>();
  join_ = j.value("join", std::string());
  trainer_join_ = j.value("trainer_join", std::string());
  port_ = j["port"].get<int>();
  return url_;
}

Process& Cluster::start_trainer(const std::string& hub, const std::string& netns,
                                const fs::path& config, const std::vector<std::string>& extra) {
  if (trainer_) trainer_->signal(SIGKILL);
  trainer_.reset();
  const fs::path toml = config.empty() ? dir_ / "run.toml" : config;
  std::vector<std::string> argv{"train", "--config", toml.string(), "--hub", hub};
  argv.insert(argv.end(), extra.begin(), extra.end());
  trainer_ = std::make_unique<Process>(argv, dir_ / ("trainer" + std::to_string(++trainer_starts_)),
                                       netns);
  return *trainer_;
}

void Cluster::kill_trainer() {
  trainer_->signal(SIGKILL);
  trainer_->wait(10s);
}

void Cluster::kill_hub() {
  hub_->signal(SIGKILL);
  hub_->wait(10s);
}

Process& Cluster::start_worker(const std::string& name, const std::string& url,
                               const std::vector<std::string>& extra, const std::string& token) {
  return launch_worker(name, {"--hub", url.empty() ? url_ : url, "--token", token}, extra, "");
}

Process& Cluster::start_worker_joined(const std::string& name, const std::string& join,
                                      const std::string& netns) {
  return launch_worker(name, {"--join", join}, {}, netns);
}

Process& Cluster::launch_worker(const std::string& name, const std::vector<std::string>& hub,
                                const std::vector<std::string>& extra, const std::string& netns) {
  // --verbose: the tests read the detailed log (stderr); the progress lines go to stdout.
  std::vector<std::string> args = {"work", "--verbose"};
  args.insert(args.end(), hub.begin(), hub.end());
  for (const auto& a : {std::string("--name"), name, std::string("--state-dir"),
                        (dir_ / ("state-" + name)).string(), std::string("--threads"),
                        std::string("1"), std::string("--grace"), std::string("5")})
    args.push_back(a);
  // Two slots unless the test gives its own (the CLI takes each option once).
  if (std::find(extra.begin(), extra.end(), "--slots") == extra.end())
    args.insert(args.end(), {"--slots", "2"});
  if (!spec_.bare_workers) {
    for (const auto& a : {std::string("--model"), assets().model.string(), std::string("--index"),
                          (assets().data / "index").string()})
      args.push_back(a);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  auto& slot = workers_[name];
  if (slot) slot->signal(SIGKILL);
  slot.reset();
  slot = std::make_unique<Process>(args, dir_ / name, netns);
  return *slot;
}

void Cluster::kill_worker(const std::string& name) {
  auto& w = *workers_.at(name);
  w.signal(SIGKILL);
  w.wait(10s);
}

std::optional<nlohmann::json> Cluster::get_json(const std::string& path) const {
  httplib::Client c("127.0.0.1", port_);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(10, 0);
  auto r = c.Get(path.c_str());
  if (!r || r->status != 200) return std::nullopt;
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

nlohmann::json Cluster::status() const {
  auto j = get_json("/v1/status");
  return j ? *j : nlohmann::json::object();
}

std::string Cluster::metrics() const {
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/metrics");
  return r && r->status == 200 ? r->body : "";
}

nlohmann::json Cluster::worker_status(const std::string& name) const {
  auto s = status();
  if (s.contains("workers"))
    for (const auto& w : s["workers"])
      if (w.value("name", "") == name) return w;
  return nullptr;
}

int64_t Cluster::step() const {
  auto s = status();
  return s.contains("step") ? s["step"].get<int64_t>() : -1;
}

int64_t Cluster::counter(const std::string& key) const {
  auto s = status();
  if (!s.contains("counters") || !s["counters"].contains(key)) return -1;
  return static_cast<int64_t>(s["counters"][key].get<double>());
}

void Cluster::stop_all(std::chrono::milliseconds timeout) {
  // Only the workers still running are expected to stop cleanly (killed or refused ones are
  // checked by their tests).
  std::set<std::string> live;
  for (auto& [n, w] : workers_)
    if (w->running()) {
      live.insert(n);
      w->signal(SIGTERM);
    }
  for (auto& [n, w] : workers_)
    if (live.count(n)) expect_clean_exit(*w, timeout, "worker " + n);
  if (trainer_ && trainer_->running()) {
    trainer_->signal(SIGTERM);
    expect_clean_exit(*trainer_, timeout, "stoa train");
  }
  if (hub_ && hub_->running()) {
    hub_->signal(SIGTERM);
    expect_clean_exit(*hub_, timeout, "stoa run");
    EXPECT_FALSE(fs::exists(run_dir() / "hub.json")) << "a cleanly stopped hub removes hub.json";
  }
}

std::string Cluster::logs() const {
  std::string out;
  // The tail, and before it the first errors and warnings of the whole log: a failure early in
  // a long run (a refused replay, a refused patch) is otherwise cut by the lines after it.
  auto tail = [](const std::string& s) { return s.size() > 3000 ? s.substr(s.size() - 3000) : s; };
  auto alarms = [](const std::string& s) {
    constexpr int kMost = 30;
    std::string lines;
    std::set<std::string> seen;
    int n = 0;
    size_t at = 0;
    while (at < s.size() && n < kMost) {
      size_t end = s.find('\n', at);
      if (end == std::string::npos) end = s.size();
      const std::string line = s.substr(at, end - at);
      if (line.find("Z E [") != std::string::npos || line.find("Z W [") != std::string::npos) {
        // A warning repeated with other numbers ("no learning signal for the last N steps")
        // is shown once.
        std::string shape = line.substr(std::min(line.size(), line.find('Z') + 1), 80);
        std::erase_if(shape, [](char ch) { return ch >= '0' && ch <= '9'; });
        if (seen.insert(shape).second) {
          lines += line.substr(0, 600) + "\n";
          ++n;
        }
      }
      at = end + 1;
    }
    return lines.empty() ? lines : "(first errors and warnings)\n" + lines + "(tail)\n";
  };
  auto both = [&](const std::string& s) { return alarms(s) + tail(s); };
  if (hub_) out += "---- stoa run / hub ----\n" + both(hub_->err());
  if (trainer_) out += "---- stoa train ----\n" + both(trainer_->err());
  for (const auto& [n, w] : workers_) out += "---- " + n + " ----\n" + both(w->err());
  return out;
}

// ---------------------------------------------------------------- ledger

LedgerView read_ledger(const fs::path& path) {
  LedgerView v;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    throw std::runtime_error("cannot open ledger " + path.string());
  }
  sqlite3_busy_timeout(db, 5000);
  auto query = [&](const char* sql, const std::function<void(sqlite3_stmt*)>& row) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("ledger query failed: ") + sqlite3_errmsg(db));
    while (sqlite3_step(st) == SQLITE_ROW) row(st);
    sqlite3_finalize(st);
  };
  auto text = [](sqlite3_stmt* st, int i) {
    const unsigned char* t = sqlite3_column_text(st, i);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  query("SELECT id, group_id, worker_id FROM rollouts", [&](sqlite3_stmt* st) {
    v.rollout_group[text(st, 0)] = text(st, 1);
    v.rollout_worker[text(st, 0)] = text(st, 2);
    v.group_rollouts[text(st, 1)]++;
  });
  query("SELECT id, status, samples FROM groups", [&](sqlite3_stmt* st) {
    v.group_status[text(st, 0)] = text(st, 1);
    v.group_samples[text(st, 0)] = sqlite3_column_int64(st, 2);
  });
  query("SELECT report FROM steps ORDER BY step", [&](sqlite3_stmt* st) {
    ++v.steps;
    auto j = nlohmann::json::parse(text(st, 0));
    v.groups_in_step_reports += j.value("groups", int64_t{0});
    if (j.contains("group_ids"))
      for (const auto& g : j["group_ids"]) v.step_group_ids.push_back(g.get<std::string>());
  });
  query("SELECT id, group_id, worker_id, state, issued_ms FROM leases ORDER BY issued_ms",
        [&](sqlite3_stmt* st) {
          v.leases.push_back(
              {text(st, 0), text(st, 1), text(st, 2), text(st, 3), sqlite3_column_int64(st, 4)});
        });
  query("SELECT COUNT(*) FROM leases WHERE state = 'expired'",
        [&](sqlite3_stmt* st) { v.leases_expired = sqlite3_column_int64(st, 0); });
  query("SELECT COUNT(*) FROM versions",
        [&](sqlite3_stmt* st) { v.versions = sqlite3_column_int64(st, 0); });
  sqlite3_close(db);
  return v;
}

}  // namespace stoa::integration
