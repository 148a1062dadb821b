// `stoa bench tokenizer`: encode throughput beside @huggingface/tokenizers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stoa::bench {

struct TokenizerBenchOptions {
  bool json = false;
  std::string tokenizer;  // default: Qwen3's from the npm oracle package
  std::string text;       // default: a synthetic mix
  double mb = 2.0;
  double min_seconds = 1.0;
};

// Prints the report (JSON with the json option); returns the exit status.
int run_tokenizer_bench(const TokenizerBenchOptions& options);

}  // namespace stoa::bench
