// `stoa bench search`: index build throughput and query latency of the BM25 search service on a
// generated PaperSearchQA-mini corpus (default 100k abstracts), locally and over HTTP.
#include "bench/search_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/machine.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/papersearchqa_mini.h"
#include "env/tasks/search/retrieval_client.h"
#include "env/tasks/search/retrieval_recall.h"
#include "env/tasks/search/retrieval_server.h"

namespace stoa::bench {
namespace {

nlohmann::json latency_summary(std::vector<double> ms) {
  if (ms.empty()) return nullptr;
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(q * (ms.size() - 1) + 0.5);
    return ms[std::min(i, ms.size() - 1)];
  };
  double sum = 0;
  for (double v : ms) sum += v;
  return {{"count", ms.size()},
          {"mean_ms", sum / ms.size()},
          {"p50_ms", at(0.5)},
          {"p99_ms", at(0.99)},
          {"max_ms", ms.back()}};
}

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Wall-clock and this thread's CPU time of each call: on a shared, loaded machine the CPU figure
// is the cost of a query, the wall figure what a caller waited.
struct Timings {
  std::vector<double> wall_ms, cpu_ms;
};

template <typename Fn>
Timings time_each(const std::vector<std::string>& queries, Fn&& fn) {
  Timings t;
  for (const auto& q : queries) {
    auto start = std::chrono::steady_clock::now();
    double cpu_start = thread_cpu_ms();
    fn(q);
    t.cpu_ms.push_back(thread_cpu_ms() - cpu_start);
    t.wall_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  return t;
}

nlohmann::json summary(const Timings& t, bool with_cpu) {
  nlohmann::json out = latency_summary(t.wall_ms);
  if (with_cpu) out["cpu"] = latency_summary(t.cpu_ms);
  return out;
}

}  // namespace

int run_search_bench(const SearchBenchOptions& opts) {
  STOA_CHECK(opts.docs >= 10 && opts.queries >= 1, ErrorKind::kInvalidArgument,
             "bench search: --docs must be >= 10 and --queries >= 1");
  std::string dir = opts.workdir;
  bool temporary = dir.empty();
  if (temporary)
    dir = (std::filesystem::temp_directory_path() /
           ("stoa_bench_search_" + std::to_string(::getpid())))
              .string();
  std::filesystem::create_directories(dir);

  env::MiniConfig config;
  config.papers = opts.docs;
  config.questions = opts.queries * 10;  // the test split (10%) supplies the queries
  env::MiniDataset data = env::generate_papersearchqa_mini(config);
  env::write_papersearchqa_mini(data, dir);
  std::vector<std::string> questions, best, gold_q;
  for (size_t i = 0; i < data.test.size() && questions.size() < static_cast<size_t>(opts.queries);
       ++i) {
    questions.push_back(data.test[i].question);
    best.push_back(data.test_info[i].oracle_query);
    gold_q.push_back(data.test[i].pmid);
  }

  log_info("bench", "indexing ", data.corpus.size(), " documents from ", dir, "/corpus.jsonl");
  env::IndexBuildStats build =
      env::build_bm25_index(dir + "/corpus.jsonl", dir + "/index", env::BadLinePolicy::kFatal);
  uintmax_t index_bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/index"))
    if (entry.is_regular_file()) index_bytes += entry.file_size();

  env::Bm25Index index(dir + "/index");
  index.search_one("warm up the page cache", 3);
  auto local_question = time_each(questions, [&](const std::string& q) { index.search_one(q, 3); });
  auto local_best = time_each(best, [&](const std::string& q) { index.search_one(q, 3); });

  env::RetrievalServer server(index);
  int port = server.bind("127.0.0.1", 0);
  std::thread serving([&] { server.serve(); });
  env::RetrievalClient client("http://127.0.0.1:" + std::to_string(port));
  auto http = time_each(questions, [&](const std::string& q) { client.search({q}, 3); });
  server.stop();
  serving.join();

  nlohmann::json out = {
      {"documents", build.documents},
      {"index_build",
       {{"seconds", build.seconds},
        {"docs_per_second", build.docs_per_second()},
        {"cpu_seconds", build.cpu_seconds},
        {"docs_per_cpu_second", build.docs_per_cpu_second()},
        {"index_bytes", index_bytes}}},
      {"query_latency",
       {{"local_question_text", summary(local_question, true)},
        {"local_best_query", summary(local_best, true)},
        // The server runs in other threads: only the wall clock means something here.
        {"http_question_text", summary(http, false)}}},
      {"recall_at_3",
       {{"question_text", env::recall_at_k(index, questions, gold_q, 3).recall()},
        {"best_query", env::recall_at_k(index, best, gold_q, 3).recall()}}},
      {"threads", 1},
      {"load_average_1m", load_average_1m()},
  };
  if (temporary && !opts.keep) std::filesystem::remove_all(dir);
  if (opts.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    const auto& lq = out["query_latency"]["local_question_text"];
    const auto& hq = out["query_latency"]["http_question_text"];
    std::printf("documents          %lld\n", static_cast<long long>(build.documents));
    std::printf("index build        %.1f docs/s wall, %.1f docs/CPU-s (%.1f s, %.1f MiB)\n",
                build.docs_per_second(), build.docs_per_cpu_second(), build.seconds,
                index_bytes / 1048576.0);
    std::printf("query (local)      p50 %.3f ms  p99 %.3f ms  (CPU p50 %.3f ms  p99 %.3f ms)\n",
                lq["p50_ms"].get<double>(), lq["p99_ms"].get<double>(),
                lq["cpu"]["p50_ms"].get<double>(), lq["cpu"]["p99_ms"].get<double>());
    std::printf("query (HTTP)       p50 %.3f ms  p99 %.3f ms\n", hq["p50_ms"].get<double>(),
                hq["p99_ms"].get<double>());
  }
  return 0;
}

}  // namespace stoa::bench
