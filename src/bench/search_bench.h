// `stoa bench search`: BM25 retrieval speed and recall.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stoa::bench {

struct SearchBenchOptions {
  int docs = 100000;
  int queries = 2000;
  std::string workdir;
  bool json = false;
  bool keep = false;
};

// Prints the report (JSON with the json option); returns the exit status.
int run_search_bench(const SearchBenchOptions& options);

}  // namespace stoa::bench
