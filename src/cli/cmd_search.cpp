// `stoa search index|serve|query`: build a BM25 index from a Search-R1 corpus, serve it with
// Search-R1's /retrieve API, or query an index or a server from the command line.
#include <csignal>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/retrieval_client.h"
#include "env/tasks/search/retrieval_server.h"

namespace stoa::cli {
namespace {

struct IndexOptions {
  std::string corpus;
  std::string out;
  bool skip_bad_lines = false;
};

int run_index(const IndexOptions& opts) {
  auto policy = opts.skip_bad_lines ? env::BadLinePolicy::kSkip : env::BadLinePolicy::kFatal;
  env::IndexBuildStats stats = env::build_bm25_index(opts.corpus, opts.out, policy);
  nlohmann::json out = {
      {"documents", stats.documents},     {"skipped_lines", stats.skipped_lines},
      {"seconds", stats.seconds},         {"docs_per_second", stats.docs_per_second()},
      {"cpu_seconds", stats.cpu_seconds}, {"index", opts.out}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

struct ServeOptions {
  std::string index;
  std::string host = "127.0.0.1";
  int port = 8000;
  int topk = 3;
};

env::RetrievalServer* g_server = nullptr;
extern "C" void stop_server(int) {
  if (g_server) g_server->stop();
}

int run_serve(const ServeOptions& opts) {
  env::Bm25Index index(opts.index);
  env::RetrievalServerOptions server_opts;
  server_opts.default_topk = opts.topk;
  env::RetrievalServer server(index, server_opts);
  int port = server.bind(opts.host, opts.port);
  g_server = &server;
  std::signal(SIGINT, stop_server);
  std::signal(SIGTERM, stop_server);
  log_info("search", "serving ", index.size(), " documents from ", opts.index, " at http://",
           opts.host, ":", port, "/retrieve");
  // The port on stdout (one line) lets scripts and tests that asked for port 0 find it.
  std::printf("listening %s:%d\n", opts.host.c_str(), port);
  std::fflush(stdout);
  server.serve();
  g_server = nullptr;
  return 0;
}

struct QueryOptions {
  std::string index;
  std::string url;
  int topk = 3;
  std::vector<std::string> queries;
};

int run_query(const QueryOptions& opts) {
  STOA_CHECK(opts.index.empty() != opts.url.empty(), ErrorKind::kInvalidArgument,
             "search query: give exactly one of --index and --url");
  std::unique_ptr<env::Retriever> retriever;
  if (!opts.index.empty()) {
    retriever = std::make_unique<env::Bm25Index>(opts.index);
  } else {
    retriever = std::make_unique<env::RetrievalClient>(opts.url);
  }
  auto results = retriever->search(opts.queries, opts.topk);
  for (size_t q = 0; q < results.size(); ++q) {
    std::printf("query: %s\n%s", opts.queries[q].c_str(),
                env::format_documents(results[q]).c_str());
    for (size_t i = 0; i < results[q].size(); ++i)
      std::printf("  [%zu] id=%s score=%.4f\n", i + 1, results[q][i].id.c_str(),
                  results[q][i].score);
  }
  return 0;
}

CommandRegistration index_cmd("search index", "Build a BM25 index from a Search-R1 corpus JSONL",
                              [](CLI::App& app) {
                                auto opts = std::make_shared<IndexOptions>();
                                app.add_option("--corpus", opts->corpus,
                                               "corpus JSONL ({\"id\", \"contents\"} per line)")
                                    ->required();
                                app.add_option("--out", opts->out, "index directory")->required();
                                app.add_flag("--skip-bad-lines", opts->skip_bad_lines,
                                             "skip malformed lines instead of failing");
                                return [opts] { return run_index(*opts); };
                              });

CommandRegistration serve_cmd(
    "search serve", "Serve an index with Search-R1's POST /retrieve", [](CLI::App& app) {
      auto opts = std::make_shared<ServeOptions>();
      app.add_option("--index", opts->index, "index directory")->required();
      app.add_option("--port", opts->port, "TCP port (0: any free)");
      app.add_option("--host", opts->host, "address to listen on");
      app.add_option("--topk", opts->topk, "top-k when a request gives none");
      return [opts] { return run_serve(*opts); };
    });

CommandRegistration query_cmd("search query", "Query an index or a retrieval server",
                              [](CLI::App& app) {
                                auto opts = std::make_shared<QueryOptions>();
                                app.add_option("--index", opts->index, "index directory");
                                app.add_option("--url", opts->url,
                                               "retrieval server, e.g. http://127.0.0.1:8000");
                                app.add_option("--topk", opts->topk, "documents per query");
                                app.add_option("queries", opts->queries, "query texts")->required();
                                return [opts] { return run_query(*opts); };
                              });

}  // namespace
}  // namespace stoa::cli
