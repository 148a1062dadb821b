// `stoa tokenizer train --corpus FILE --vocab-size N --out DIR [--min-frequency F]`
//
// Trains a byte-level BPE tokenizer (see model/bpe_trainer.h) and writes DIR/tokenizer.json and
// DIR/tokenizer_config.json. The corpus is plain text (.txt, read in ~1 MiB chunks cut at line
// ends) or JSON lines (.jsonl: each line an object whose "contents" or "text" string is one
// document). Prints a JSON summary on stdout.
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/jsonl.h"
#include "model/bpe_trainer.h"

namespace stoa::cli {
namespace {

struct Options {
  std::string corpus;
  int64_t vocab_size = 8192;
  int64_t min_frequency = 2;
  std::string out;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int64_t feed_corpus(const std::string& path, BpeTrainer& trainer, int64_t& bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::kNotFound, path, ": cannot open corpus");
  int64_t documents = 0;
  std::string line;
  if (ends_with(path, ".jsonl")) {
    // A malformed line stops training with "<path>:<line>: why" (core/jsonl.h).
    read_jsonl(path, BadLinePolicy::kFatal, [&](const nlohmann::json& doc, int64_t) {
      const char* key = doc.is_object() && doc.contains("contents") ? "contents" : "text";
      STOA_CHECK(doc.is_object() && doc.contains(key) && doc.at(key).is_string(),
                 ErrorKind::kBadFormat,
                 "expected an object with a \"contents\" or \"text\" string");
      const std::string& text = doc.at(key).get_ref<const std::string&>();
      trainer.add_text(text);
      bytes += static_cast<int64_t>(text.size());
      ++documents;
    });
    return documents;
  }
  std::string chunk;
  while (std::getline(in, line)) {
    chunk += line;
    chunk += '\n';
    if (chunk.size() >= (size_t{1} << 20)) {
      trainer.add_text(chunk);
      bytes += static_cast<int64_t>(chunk.size());
      chunk.clear();
      ++documents;
    }
  }
  if (!chunk.empty()) {
    trainer.add_text(chunk);
    bytes += static_cast<int64_t>(chunk.size());
    ++documents;
  }
  return documents;
}

int run(const Options& opt) {
  auto start = std::chrono::steady_clock::now();
  BpeTrainerOptions options;
  options.vocab_size = opt.vocab_size;
  options.min_frequency = opt.min_frequency;
  BpeTrainer trainer(options);
  int64_t bytes = 0;
  int64_t documents = feed_corpus(opt.corpus, trainer, bytes);
  TrainedBpe trained = trainer.train();
  trained.write(opt.out);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json summary = {{"corpus", opt.corpus},
                            {"documents", documents},
                            {"bytes", bytes},
                            {"distinct_words", trainer.word_count()},
                            {"merges", trained.merges.size()},
                            {"vocab_size", trained.tokens.size()},
                            {"out", opt.out},
                            {"seconds", seconds}};
  std::cout << summary.dump() << std::endl;
  return 0;
}

CommandRegistration reg(
    "tokenizer train", "Train a byte-level BPE tokenizer on a corpus", [](CLI::App& app) {
      auto opt = std::make_shared<Options>();
      app.add_option("--corpus", opt->corpus, "Corpus (.txt or .jsonl)")->required();
      app.add_option("--vocab-size", opt->vocab_size,
                     "Total vocabulary incl. bytes and special tokens")
          ->required();
      app.add_option("--out", opt->out, "Output directory")->required();
      app.add_option("--min-frequency", opt->min_frequency,
                     "Smallest pair count that is still merged");
      return [opt] { return run(*opt); };
    });

}  // namespace
}  // namespace stoa::cli
