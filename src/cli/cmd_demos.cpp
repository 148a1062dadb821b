// `stoa data demos`: scripted, deliberately imperfect SFT demonstrations from the TRAIN split
// (env/tasks/search/demonstrations.h), tokenised with the model's tokenizer, as the pre-tokenised SFT JSONL
// that `stoa train --sft` reads. Torch-free.
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <memory>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "env/dataset.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/copy_curriculum.h"
#include "env/tasks/search/demonstrations.h"
#include "env/tasks/search/search_task.h"
#include "env/token_codec.h"
#include "env/tokenizer_codec.h"
#include "model/tokenizer.h"

namespace stoa::cli {
namespace {

struct Options {
  std::string data;
  std::string index;
  std::string tokenizer;  // tokenizer.json ("" : byte-level codec)
  std::string out;
  int64_t limit = 0;
  // The last `hold_out` train questions are kept out of the demonstrations and the curriculum
  // and written to `hold_out_out`: in-distribution questions the SFT has never seen, on which
  // `stoa demo` decides when its warm start is good enough (validation stays untouched).
  int64_t hold_out = 0;
  std::string hold_out_out;
  bool copy_curriculum = false;  // append env/tasks/search/copy_curriculum.h's examples (every train item)
  env::DemoOptions demo;
};

int run(const Options& o) {
  std::vector<env::QaItem> train =
      env::load_qa(o.data + "/train.jsonl", env::BadLinePolicy::kFatal);
  STOA_CHECK(o.hold_out >= 0 && o.hold_out < static_cast<int64_t>(train.size()),
             ErrorKind::kInvalidArgument, "data demos: --hold-out ", o.hold_out,
             " must leave some of the ", train.size(), " train questions");
  STOA_CHECK(o.hold_out == 0 || !o.hold_out_out.empty(), ErrorKind::kInvalidArgument,
             "data demos: --hold-out needs --hold-out-out (where the held-out questions go)");
  if (o.hold_out > 0) {
    std::vector<nlohmann::json> held;
    for (auto it = train.end() - o.hold_out; it != train.end(); ++it)
      held.push_back(env::to_json(*it));
    env::write_jsonl(o.hold_out_out, held);
    train.resize(train.size() - static_cast<size_t>(o.hold_out));
  }
  const std::vector<env::QaItem> all_train = train;
  if (o.limit > 0 && static_cast<int64_t>(train.size()) > o.limit) train.resize(o.limit);
  std::unique_ptr<env::TokenCodec> codec;
  if (o.tokenizer.empty()) {
    codec = std::make_unique<env::ByteCodec>();
  } else {
    codec = std::make_unique<env::TokenizerCodec>(Tokenizer::from_file(o.tokenizer));
  }
  env::Bm25Index index(o.index.empty() ? o.data + "/index" : o.index);
  env::SearchTask task(index);
  env::DemoStats st;
  auto demos = env::make_demonstrations(train, task, *codec, o.demo, &st);
  env::CurriculumStats cs;
  if (o.copy_curriculum) {
    std::unordered_map<std::string, env::CorpusDoc> papers;
    for (auto& doc : env::load_corpus(o.data + "/corpus.jsonl", env::BadLinePolicy::kFatal))
      papers.emplace(doc.id, std::move(doc));
    auto extra = env::make_copy_curriculum(
        all_train,
        [&](const std::string& pmid) -> const env::CorpusDoc* {
          auto it = papers.find(pmid);
          return it == papers.end() ? nullptr : &it->second;
        },
        *codec, &cs);
    demos.insert(demos.end(), std::make_move_iterator(extra.begin()),
                 std::make_move_iterator(extra.end()));
  }
  env::write_demonstrations_jsonl(demos, o.out);
  const double n = st.demonstrations ? static_cast<double>(st.demonstrations) : 1.0;
  nlohmann::json j = {{"out", o.out},
                      {"demonstrations", st.demonstrations},
                      {"held_out", o.hold_out},
                      {"good_query_fraction", st.good_queries / n},
                      {"found_fraction", st.found / n},
                      {"correct_fraction", st.correct / n},
                      {"tokens", st.tokens},
                      {"trained_tokens", st.trained_tokens}};
  if (o.copy_curriculum) {
    j["copy_curriculum"] = {{"query_examples", cs.query_examples},
                            {"answer_examples", cs.answer_examples},
                            {"tokens", cs.tokens},
                            {"trained_tokens", cs.trained_tokens}};
  }
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

CommandRegistration demos_cmd(
    "data demos", "Scripted imperfect SFT demonstrations from the train split", [](CLI::App& app) {
      auto o = std::make_shared<Options>();
      app.add_option("--data", o->data, "dataset directory (train.jsonl)")->required();
      app.add_option("--index", o->index, "BM25 index directory (default <data>/index)");
      app.add_option("--tokenizer", o->tokenizer, "tokenizer.json (default: byte-level)");
      app.add_option("--out", o->out, "output SFT JSONL")->required();
      app.add_option("--limit", o->limit, "first N train questions only (0: all)");
      app.add_option("--hold-out", o->hold_out,
                     "keep the last N train questions out of the demonstrations and the "
                     "curriculum (written to --hold-out-out)");
      app.add_option("--hold-out-out", o->hold_out_out, "JSONL file for the held-out questions");
      app.add_option("--good-query", o->demo.good_query, "P(a good search query)");
      app.add_option("--answer-when-found", o->demo.answer_when_found,
                     "P(correct answer | retrieved docs contain it)");
      app.add_option("--answer-when-missing", o->demo.answer_when_missing,
                     "P(correct answer | they do not)");
      app.add_option("--max-turns", o->demo.episode.max_turns, "episode max_turns");
      app.add_option("--max-observation-tokens", o->demo.episode.max_observation_tokens,
                     "observation budget per search");
      app.add_option("--seed", o->demo.seed, "random seed");
      app.add_flag("--copy-curriculum", o->copy_curriculum,
                   "also write the copy curriculum (two short examples per train question, all "
                   "of them: the subject into a query, the answer out of the gold abstract)");
      return [o] { return run(*o); };
    });

}  // namespace
}  // namespace stoa::cli
