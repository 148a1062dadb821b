#include "app/demo/demo_setup.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "app/demo/demo_report.h"
#include "app/demo/sft_to_target.h"
#include "app/demo/warm_start.h"
#include "core/error.h"
#include "core/process_run.h"
#include "env/dataset.h"
#include "model/presets.h"
#include "model/tokenizer.h"
#include "model/weights.h"

namespace stoa::app {
namespace fs = std::filesystem;
namespace {

template <typename Int>
requires std::is_integral_v<Int> std::string str(Int v) {
  return std::to_string(v);
}
std::string str(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// A stage is reused when its stamp holds exactly these parameters (which include the stamps of
// the stages it depends on, so a redone stage invalidates everything after it).
class Stages {
 public:
  Stages(std::string dir, std::string logs, std::function<void(const std::string&)> say)
      : dir_(std::move(dir)), logs_(std::move(logs)), say_(std::move(say)) {}

  void run(const std::string& name, const nlohmann::json& params,
           const std::function<void()>& body) {
    chain_[name] = params;
    const nlohmann::json key = chain_;
    const fs::path stamp = fs::path(dir_) / (name + ".done");
    if (fs::exists(stamp)) {
      std::ifstream in(stamp);
      nlohmann::json old = nlohmann::json::parse(in, nullptr, false);
      if (old == key) {
        say_(name + ": reused (" + stamp.string() + ")");
        return;
      }
    }
    fs::remove(stamp);
    fs::remove(fs::path(logs_) / (name + ".log"));  // the log holds this attempt only
    const auto t0 = std::chrono::steady_clock::now();
    body();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::ofstream(stamp) << key.dump() << '\n';
    std::ostringstream msg;
    msg.precision(1);
    msg << std::fixed << name << ": done in " << s << " s";
    say_(msg.str());
  }

  // The parameters of every stage run so far, in the form the stamps hold.
  const nlohmann::json& chain() const { return chain_; }

 private:
  std::string dir_, logs_;
  std::function<void(const std::string&)> say_;
  nlohmann::json chain_ = nlohmann::json::object();
};

// The tokenizer learns from what the model reads: the abstracts, the training questions and the
// Search-R1 prompt wording (validation/test questions are not used).
void write_tokenizer_corpus(const DemoPaths& p, const std::string& out) {
  std::ofstream f(out);
  STOA_CHECK(f.good(), ErrorKind::kIo, "demo: cannot write ", out);
  env::for_each_corpus_doc(p.data + "/corpus.jsonl", env::BadLinePolicy::kFatal,
                           [&](env::CorpusDoc&& d) { f << d.contents << '\n'; });
  for (const auto& q : env::load_qa(p.data + "/train.jsonl", env::BadLinePolicy::kFatal))
    f << q.question << '\n' << q.answer << '\n';
  STOA_CHECK(f.good(), ErrorKind::kIo, "demo: cannot write ", out);
}

void init_model(const DemoSetupOptions& o, const DemoPaths& p) {
  const Tokenizer tok = Tokenizer::from_file(p.tokenizer + "/tokenizer.json");
  ModelConfig c = preset_config(o.preset);
  // The embedding table rounds up to a multiple of 32 (the int8 grid's group), past the
  // tokenizer's last id: the extra rows are never produced by the tokenizer.
  c.vocab_size = (tok.vocab_size() + 31) / 32 * 32;
  auto id = [&](const char* t) {
    auto v = tok.token_id(t);
    STOA_CHECK(v.has_value(), ErrorKind::kBadFormat, p.tokenizer, "/tokenizer.json has no ", t);
    return static_cast<int64_t>(*v);
  };
  c.bos_token_id = id("<|im_start|>");
  c.eos_token_id = id("<|im_end|>");
  c.pad_token_id = id("<|endoftext|>");
  save_model_dir(random_weights(c, o.seed), p.model0);
  copy_tokenizer(p.tokenizer, p.model0);
}

}  // namespace

void apply_full_setup(DemoSetupOptions* o) {
  o->sft_examples = std::max<int64_t>(o->sft_examples, 4000);
  o->copy_curriculum = true;
  o->sft_batch_tokens = std::min<int64_t>(o->sft_batch_tokens, 2048);
  o->sft_epochs = std::max(o->sft_epochs, 3);
  if (o->sft_target_pass1 <= 0) o->sft_target_pass1 = 0.28;
}

DemoPaths::DemoPaths(const std::string& dir)
    : data(dir + "/data"),
      index(dir + "/data/index"),
      tokenizer(dir + "/tokenizer"),
      model0(dir + "/model-init"),
      sft_data(dir + "/sft.jsonl"),
      sft_model(dir + "/model-sft"),
      logs(dir + "/logs"),
      run(dir + "/run"),
      probe(dir + "/probe.jsonl") {}

void copy_tokenizer(const std::string& from_dir, const std::string& to_dir) {
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    const fs::path src = fs::path(from_dir) / f;
    if (fs::exists(src))
      fs::copy_file(src, fs::path(to_dir) / f, fs::copy_options::overwrite_existing);
  }
}

DemoSetupResult prepare_demo(const DemoSetupOptions& o,
                             const std::function<void(const std::string&)>& say) {
  const DemoPaths p(o.dir);
  fs::create_directories(p.logs);
  const std::string exe = self_executable();
  auto log = [&](const std::string& name) { return p.logs + "/" + name + ".log"; };
  Stages stages(o.dir, p.logs, say);

  stages.run("data", {{"papers", o.papers}, {"questions", o.questions}, {"seed", o.seed}}, [&] {
    fs::remove_all(p.data);
    run_child_or_throw(
        {exe, "data", "generate", "--out", p.data, "--papers", str(o.papers), "--questions",
         str(o.questions), "--seed", str(static_cast<int64_t>(o.seed))},
        log("data"), "stoa data generate");
  });
  stages.run("index", nlohmann::json::object(), [&] {
    fs::remove_all(p.index);
    run_child_or_throw(
        {exe, "search", "index", "--corpus", p.data + "/corpus.jsonl", "--out", p.index},
        log("index"), "stoa search index");
  });
  stages.run("tokenizer", {{"vocab_size", o.vocab_size}}, [&] {
    fs::remove_all(p.tokenizer);
    const std::string corpus = o.dir + "/tokenizer-corpus.txt";
    write_tokenizer_corpus(p, corpus);
    run_child_or_throw({exe, "tokenizer", "train", "--corpus", corpus, "--vocab-size",
                        str(o.vocab_size), "--out", p.tokenizer},
                       log("tokenizer"), "stoa tokenizer train");
    fs::remove(corpus);
  });
  if (!o.warm_start.empty()) {
    const WarmStart warm = read_warm_start(o.warm_start);
    const std::string why_not =
        warm_start_mismatch(warm, stages.chain(), p.tokenizer + "/tokenizer.json");
    if (why_not.empty()) {
      stages.run("sft", {{"warm_start", warm.provenance}}, [&] {
        fs::remove_all(p.sft_model);
        install_warm_start(warm, p.sft_model);
      });
      say("warm start: " + o.warm_start + " (made by `stoa demo --full`'s SFT on this data)");
      return {o.warm_start};
    }
    STOA_CHECK(!o.warm_start_required, ErrorKind::kInvalidArgument, "the warm start ", o.warm_start,
               " does not fit this demo: ", why_not);
    say("warm start " + o.warm_start + " does not fit (" + why_not +
        "); training the warm start here");
  }
  stages.run("model-init", {{"preset", o.preset}, {"seed", o.seed}}, [&] {
    fs::remove_all(p.model0);
    init_model(o, p);
  });
  const bool to_target = o.sft_target_pass1 > 0;
  nlohmann::json demo_params = {{"examples", o.sft_examples},
                                {"max_observation_tokens", o.max_observation_tokens},
                                {"copy_curriculum", o.copy_curriculum}};
  if (to_target) demo_params["hold_out"] = o.sft_probe_questions;
  stages.run("demonstrations", demo_params, [&] {
    std::vector<std::string> argv = {exe,
                                     "data",
                                     "demos",
                                     "--data",
                                     p.data,
                                     "--index",
                                     p.index,
                                     "--tokenizer",
                                     p.model0 + "/tokenizer.json",
                                     "--out",
                                     p.sft_data,
                                     "--limit",
                                     str(o.sft_examples),
                                     "--max-observation-tokens",
                                     str(o.max_observation_tokens),
                                     "--seed",
                                     str(static_cast<int64_t>(o.seed))};
    if (o.copy_curriculum) argv.push_back("--copy-curriculum");
    if (to_target) {
      argv.insert(argv.end(),
                  {"--hold-out", str(o.sft_probe_questions), "--hold-out-out", p.probe});
    }
    run_child_or_throw(argv, log("demonstrations"), "stoa data demos");
  });
  nlohmann::json sft_params = {{"epochs", o.sft_epochs},
                               {"lr", o.sft_lr},
                               {"batch_tokens", o.sft_batch_tokens},
                               {"seed", o.seed}};
  if (to_target) {
    sft_params["target_pass1"] = o.sft_target_pass1;
    sft_params["snapshot_every"] = o.sft_snapshot_every;
  }
  stages.run("sft", sft_params, [&] {
    fs::remove_all(p.sft_model);
    say("sft: supervised warm start on " + str(o.sft_examples) + " scripted demonstrations" +
        (o.copy_curriculum ? " + the copy curriculum" : "") + " (log: " + log("sft") + ")");
    const std::vector<std::string> argv = {exe,
                                           "train",
                                           "--sft",
                                           "--data",
                                           p.sft_data,
                                           "--model",
                                           p.model0,
                                           "--out",
                                           p.sft_model,
                                           "--epochs",
                                           str(int64_t{o.sft_epochs}),
                                           "--lr",
                                           str(o.sft_lr),
                                           "--batch-tokens",
                                           str(o.sft_batch_tokens),
                                           "--micro-batch-tokens",
                                           str(o.sft_batch_tokens),
                                           "--warmup",
                                           "10",
                                           "--schedule",
                                           "cosine",
                                           "--threads",
                                           str(int64_t{o.threads}),
                                           "--seed",
                                           str(static_cast<int64_t>(o.seed)),
                                           "--json"};
    if (to_target) {
      SftToTargetOptions t;
      t.train_argv = argv;
      t.out = p.sft_model;
      t.log_path = log("sft");
      t.probe.data = p.data;
      t.probe.index = p.index;
      t.probe.questions = p.probe;
      t.probe.episode.max_observation_tokens = o.max_observation_tokens;
      t.probe_log_dir = p.logs;
      t.target = o.sft_target_pass1;
      t.snapshot_every = o.sft_snapshot_every;
      const SftToTargetResult r = sft_to_target(t, say);
      nlohmann::json curve = nlohmann::json::array();
      for (const ProbePoint& c : r.curve) curve.push_back({{"step", c.step}, {"pass1", c.pass1}});
      std::ofstream(p.logs + "/sft-probe.json")
          << nlohmann::json{{"target", o.sft_target_pass1},
                            {"probe_questions", o.sft_probe_questions},
                            {"reached", r.reached},
                            {"step", r.step},
                            {"pass1", r.pass1},
                            {"curve", curve}}
                 .dump(2)
          << '\n';
    } else {
      run_child_or_throw(argv, log("sft"), "stoa train --sft", [&](const std::string& line) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_object() || !j.contains("step")) return;
        say(sft_progress_line(j));
      });
    }
    copy_tokenizer(p.model0, p.sft_model);
  });
  nlohmann::json sft_probe;
  if (std::ifstream probe(p.logs + "/sft-probe.json"); to_target && probe.good())
    sft_probe = nlohmann::json::parse(probe, nullptr, /*allow_exceptions=*/false);
  write_provenance(p.sft_model, stages.chain(), sft_probe);
  return {};
}

}  // namespace stoa::app
