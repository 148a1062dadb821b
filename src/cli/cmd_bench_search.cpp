// `stoa bench search`: BM25 retrieval speed and recall (bench/search_bench.h).
#include <memory>

#include "bench/search_bench.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration bench_cmd("bench search",
                              "BM25 index build throughput and query latency (local and HTTP)",
                              [](CLI::App& app) {
                                auto opts = std::make_shared<bench::SearchBenchOptions>();
                                app.add_option("--docs", opts->docs, "corpus size (abstracts)");
                                app.add_option("--queries", opts->queries, "timed queries");
                                app.add_option("--workdir", opts->workdir,
                                               "where to write corpus and index (default: temp)");
                                app.add_flag("--keep", opts->keep, "keep the temporary workdir");
                                app.add_flag("--json", opts->json, "print JSON");
                                return [opts] { return bench::run_search_bench(*opts); };
                              });

}  // namespace
}  // namespace stoa::cli
