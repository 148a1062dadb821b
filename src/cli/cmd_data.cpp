// `stoa data generate`: writes PaperSearchQA-mini (corpus + QA splits) and, with --measure,
// indexes the corpus and reports recall@3 of the gold paper for several query strategies.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/papersearchqa_mini.h"
#include "env/tasks/search/retrieval_recall.h"

namespace stoa::cli {
namespace {

struct GenerateOptions {
  std::string out;
  env::MiniConfig config;
  bool measure = false;
};

nlohmann::json measure(const env::MiniDataset& data, const std::string& index_dir) {
  env::build_bm25_index(data.corpus, index_dir);
  env::Bm25Index index(index_dir);
  nlohmann::json out;
  auto add = [&](const char* split, const std::vector<env::QaItem>& items,
                 const std::vector<env::MiniQuestionInfo>& infos) {
    nlohmann::json rows;
    for (int paraphrased = -1; paraphrased <= 1; ++paraphrased) {
      std::vector<std::string> question, mention, mention_kw, oracle, gold;
      for (size_t i = 0; i < items.size(); ++i) {
        if (paraphrased >= 0 && infos[i].paraphrased != (paraphrased == 1)) continue;
        question.push_back(items[i].question);
        mention.push_back(infos[i].subject_mention);
        mention_kw.push_back(infos[i].subject_mention + " " + infos[i].relation_keyword);
        oracle.push_back(infos[i].oracle_query);
        gold.push_back(items[i].pmid);
      }
      const char* group = paraphrased < 0 ? "all" : paraphrased ? "paraphrased" : "plain";
      rows[group] = {
          {"questions", question.size()},
          {"question_as_query", env::recall_at_k(index, question, gold, 3).recall()},
          {"subject_mention", env::recall_at_k(index, mention, gold, 3).recall()},
          {"subject_mention_keyword", env::recall_at_k(index, mention_kw, gold, 3).recall()},
          {"best_query", env::recall_at_k(index, oracle, gold, 3).recall()}};
    }
    out[split] = rows;
  };
  add("train", data.train, data.train_info);
  add("validation", data.validation, data.validation_info);
  add("test", data.test, data.test_info);
  return out;
}

int run_generate(const GenerateOptions& opts) {
  env::MiniDataset data = env::generate_papersearchqa_mini(opts.config);
  env::write_papersearchqa_mini(data, opts.out);
  nlohmann::json summary = {{"out", opts.out},
                            {"seed", opts.config.seed},
                            {"papers", data.corpus.size()},
                            {"train", data.train.size()},
                            {"validation", data.validation.size()},
                            {"test", data.test.size()}};
  if (opts.measure) summary["recall_at_3"] = measure(data, opts.out + "/index");
  std::printf("%s\n", summary.dump(2).c_str());
  return 0;
}

CommandRegistration generate_cmd(
    "data generate", "Generate PaperSearchQA-mini (synthetic corpus + QA splits)",
    [](CLI::App& app) {
      auto opts = std::make_shared<GenerateOptions>();
      app.add_option("--out", opts->out, "output directory")->required();
      app.add_option("--papers", opts->config.papers, "corpus size (abstracts)");
      app.add_option("--questions", opts->config.questions, "questions over all splits");
      app.add_option("--seed", opts->config.seed, "random seed");
      app.add_flag("--measure", opts->measure,
                   "index the corpus into OUT/index and report recall@3 per query strategy");
      return [opts] { return run_generate(*opts); };
    });

}  // namespace
}  // namespace stoa::cli
