// A newcomer's afternoon, scripted (issue 49): their own model from `stoa model init`, their own
// task as a Python environment written from docs/environment-protocol.md alone
// (newcomer_env.py: repeat a word), `stoa run` with the defaults ([hub] port = 0), two
// volunteers joined by nothing but the join string, the hub killed and started again, the run
// to its end, the policy exported. Along the way, each of the surprises is asserted
// gone:
// - a model without a tokenizer is refused in words, not trained on raw bytes;
// - a config.json whose EOS is not the token the chat template ends a turn with is refused;
// - the restarted hub keeps its port and its join string, and the volunteers carry on;
// - steps whose groups are all uniform (a random model never says the word) are warned of;
// - a volunteer is told in one plain line that the hub is away, that it is back, and that the
//   run has ended (and then stops with status 0), never `Generating: 0.0 tokens/s` meanwhile;
// - [eval] scores the published weights on the held-out split during the run;
// - the operator token is in no printed URL, and no stage relay port is opened without a group.
#include <fstream>
#include <regex>

#include "core/process.h"
#include "integration/cluster.h"
#include "support/source_dir.h"
#include "support/stoa_cli.h"

namespace stoa::integration {
namespace {

// The newcomer's environment server on a free loopback port, killed with the object.
class NewcomerEnv {
 public:
  explicit NewcomerEnv(const fs::path& dir) : dir_(dir) {
    if (python({"data", "--out", data().string()}, "env-data.log").wait() != 0)
      throw std::runtime_error("newcomer_env.py data failed:\n" + read_text(dir / "env-data.log"));
    const fs::path port_file = dir / "env.port";
    server_ = std::make_unique<stoa::Process>(
        python({"serve", "--port", "0", "--port-file", port_file.string()}, "env.log"));
    if (!wait_until([&] { return fs::exists(port_file); }, 20s))
      throw std::runtime_error("newcomer_env.py serve did not start:\n" +
                               read_text(dir / "env.log"));
    std::ifstream(port_file) >> port_;
  }
  fs::path data() const { return dir_ / "data"; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  stoa::Process python(const std::vector<std::string>& args, const std::string& log) const {
    const std::string python3 = find_executable("python3");
    if (python3.empty()) throw std::runtime_error("python3 is needed (scripts/setup installs it)");
    std::vector<std::string> argv = {
        python3, (test::source_dir() / "tests/integration/newcomer_env.py").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessOptions o = logged_to((dir_ / log).string(), true);
    o.die_with_parent = true;
    return stoa::Process::start(argv, o);
  }
  fs::path dir_;
  std::unique_ptr<stoa::Process> server_;
  int port_ = 0;
};

// `stoa run --config` on the cluster's run.toml with another model: refused before serving.
// Returns its stderr.
std::string refused_run(Cluster& c, const fs::path& model) {
  run::RunConfig config = run::load_run_config((c.dir() / "run.toml").string());
  config.model_dir = model.string();
  config.run_dir = (c.dir() / ("refused-" + model.filename().string())).string();
  const fs::path toml = c.dir() / ("refused-" + model.filename().string() + ".toml");
  run::save_run_config(config, toml.string());
  Process p({"run", "--config", toml.string()}, c.dir() / ("refused-" + model.filename().string()));
  const auto status = p.wait(120s);
  EXPECT_TRUE(status.has_value()) << "a refused run must exit";
  EXPECT_NE(status.value_or(0), 0) << p.err();
  EXPECT_FALSE(fs::exists(fs::path(config.run_dir) / "hub.json")) << "refused before serving";
  return p.err();
}

constexpr int64_t kMaxSteps = 10;

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(Newcomer, OwnModelOwnTaskVolunteersRestartAndExport) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  const fs::path root = fs::temp_directory_path() / ("stoa_newcomer_" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const NewcomerEnv environment(root);

  // The model as `stoa model init` makes it alone: weights and config.json, no tokenizer.
  ASSERT_EQ(testing::run_stoa(
                root, "model init --preset tiny-lfm2 --seed 5 --out " + (root / "bare").string()),
            0)
      << read_text(root / "err.txt");
  EXPECT_TRUE(has(read_text(root / "err.txt"), "--tokenizer")) << "init says where one comes from";
  // The tokenizer the quickstart tells them to train, copied in with its chat template's ids.
  {
    std::ofstream corpus(root / "corpus.txt");
    for (const char* f : {"train.jsonl", "val.jsonl"}) corpus << read_text(environment.data() / f);
  }
  ASSERT_EQ(testing::run_stoa(root, "tokenizer train --corpus " + (root / "corpus.txt").string() +
                                        " --vocab-size 320 --out " + (root / "tok").string()),
            0)
      << read_text(root / "err.txt");
  const fs::path model = root / "model";
  ASSERT_EQ(testing::run_stoa(root, "model init --preset tiny-lfm2 --seed 5 --tokenizer " +
                                        (root / "tok").string() + " --out " + model.string()),
            0)
      << read_text(root / "err.txt");
  // The model: EOS a byte of the trained tokenizer, not the template's end of turn.
  fs::copy(model, root / "wrong-eos", fs::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(read_text(model / "config.json"));
  const int64_t end_of_turn = config.at("eos_token_id").get<int64_t>();
  config["eos_token_id"] = 2;
  std::ofstream(root / "wrong-eos" / "config.json") << config.dump(2);

  RunSpec spec;  // port 0: the default
  spec.bare_workers = true;
  spec.group_size = 2;
  spec.max_new_tokens = 8;
  spec.max_turns = 1;
  spec.adjust = [&](run::RunConfig& c) {
    c.model_dir = model.string();
    c.data_dir = environment.data().string();
    c.task = "http";
    c.task_options = env::TaskOptions();
    c.task_options.set("url", environment.url());
    c.loop.max_steps = kMaxSteps;
    c.loop.no_signal_warn_steps = 2;
    c.eval.every_steps = 2;
    c.eval.limit = 4;
  };
  Cluster c("newcomer", spec);

  const std::string no_tokenizer = refused_run(c, root / "bare");
  EXPECT_TRUE(has(no_tokenizer, "has no tokenizer.json")) << no_tokenizer;
  const std::string wrong_eos = refused_run(c, root / "wrong-eos");
  EXPECT_TRUE(has(wrong_eos, "the chat template ends a turn with")) << wrong_eos;
  EXPECT_TRUE(has(wrong_eos, "\"eos_token_id\": " + std::to_string(end_of_turn))) << wrong_eos;

  // The run, and two volunteers who know nothing but the join string.
  c.start_hub();
  const int port = c.port();
  const std::string join = c.join_string();
  ASSERT_FALSE(join.empty());
  c.start_worker_joined("alice", join);
  c.start_worker_joined("bob", join);
  // The held-out split scored after step 2 (and the baseline before step 1).
  ASSERT_TRUE(wait_until([&] { return has(c.hub().err(), "held-out eval at step 2"); }, 240s))
      << c.logs();
  for (const char* w : {"alice", "bob"}) {
    const std::string out = c.worker(w).out();
    EXPECT_TRUE(has(out, "Joined as")) << w << ":\n" << out;
    EXPECT_TRUE(has(out, "Weights version")) << w << ":\n" << out;
  }
  // A random model never says the word: every group is uniform, and the run says so.
  EXPECT_TRUE(c.status()["learning_signal"].contains("warning")) << c.status().dump();

  // The hub's machine loses power; the operator starts the run again with the same command.
  const int64_t steps_before = c.step();
  c.kill_hub();
  ASSERT_TRUE(wait_until(
      [&] {
        return has(c.worker("alice").out(), "The hub cannot be reached") &&
               has(c.worker("bob").out(), "The hub cannot be reached");
      },
      60s))
      << c.worker("alice").out();
  c.start_hub();
  EXPECT_EQ(c.port(), port) << "the port the run first took";
  EXPECT_EQ(c.join_string(), join) << "the volunteers' join string still works";

  // The run goes on to max_steps with the same volunteers, then ends, and they are told.
  const auto hub_exit = c.hub().wait(300s);
  ASSERT_TRUE(hub_exit.has_value()) << c.logs();
  EXPECT_EQ(*hub_exit, 0) << c.hub().err();
  EXPECT_LT(steps_before, kMaxSteps) << "steps were left for after the restart";
  // The operator token is in no URL the run printed (the dashboard link is the page itself on
  // loopback, a one-time login code beyond it; the join string carries its token after '#', which
  // no browser sends), and no stage relay was opened for a run without pipeline groups.
  const std::string hub_said = c.hub().out() + c.hub().err();
  EXPECT_TRUE(has(hub_said, "dashboard: ")) << hub_said;
  EXPECT_FALSE(has(hub_said, "?token=") || has(hub_said, "&token=")) << hub_said;
  EXPECT_FALSE(has(hub_said, "relayed on port")) << hub_said;
  for (const char* w : {"alice", "bob"}) {
    const auto status = c.worker(w).wait(60s);
    ASSERT_TRUE(status.has_value()) << w << " did not stop at the run's end:\n"
                                    << c.worker(w).out();
    EXPECT_EQ(*status, 0) << c.worker(w).err();
    const std::string out = c.worker(w).out();
    const size_t away = out.find("The hub cannot be reached");
    const size_t back = out.find("The hub answers again");
    ASSERT_NE(back, std::string::npos) << w << ":\n" << out;
    EXPECT_LT(away, back);
    EXPECT_FALSE(has(out.substr(away, back - away), "Generating:"))
        << "no generation line while the hub is away:\n"
        << out;
    EXPECT_TRUE(has(out.substr(back), "The run has ended")) << w << ":\n" << out;
  }
  // The run's log holds both starts: the warning, and every held-out evaluation.
  const std::string log = read_text(c.run_dir() / "run.log");
  EXPECT_TRUE(has(log, "no learning signal for the last")) << log;
  EXPECT_TRUE(has(log, "held-out eval at step 0 (version 0)")) << log;
  EXPECT_TRUE(has(log, "over 4 questions of val")) << log;
  const std::string last = "held-out eval at step " + std::to_string(kMaxSteps);
  EXPECT_TRUE(has(log, last)) << log;
  const std::string evals = read_text(c.run_dir() / "eval.jsonl");
  EXPECT_TRUE(has(evals, "\"step\":" + std::to_string(kMaxSteps))) << evals;

  // The trained policy out as a Hugging Face directory with the newcomer's tokenizer.
  ASSERT_EQ(testing::run_stoa(root, "model export-hf --from " + c.run_dir().string() + " --out " +
                                        (root / "export").string()),
            0)
      << read_text(root / "err.txt");
  EXPECT_TRUE(fs::exists(root / "export" / "tokenizer.json"));
  const auto exported = nlohmann::json::parse(read_text(root / "export" / "config.json"));
  EXPECT_EQ(exported.at("eos_token_id"), end_of_turn);
  std::error_code ec;
  if (!HasFailure()) fs::remove_all(root, ec);
}

}  // namespace
}  // namespace stoa::integration
