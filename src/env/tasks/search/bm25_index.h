// A BM25 index over a Search-R1 corpus, stored as a Xapian database (one directory). Scoring is
// Xapian's BM25 with Lucene's defaults (k1 = 0.9, b = 0.4; k2 = 0, k3 = 1, min_normlen = 0.5),
// the setting Search-R1 / Pyserini use. Text analysis: Xapian's word splitting, Lucene's English
// stop words, the English (Porter2) stemmer on every term. Queries go through the very same
// analysis as documents (no query-language parser), so no query text can be a syntax error.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "env/dataset.h"
#include "env/tasks/search/retriever.h"

namespace Xapian {
class Database;
}

namespace stoa::env {

struct IndexBuildStats {
  int64_t documents = 0;
  int64_t skipped_lines = 0;
  double seconds = 0;      // wall clock
  double cpu_seconds = 0;  // this process's CPU time (meaningful on a loaded machine)
  double docs_per_second() const { return seconds > 0 ? documents / seconds : 0; }
  double docs_per_cpu_second() const { return cpu_seconds > 0 ? documents / cpu_seconds : 0; }
};

// Builds an index in out_dir (created or overwritten) from a corpus JSONL file.
IndexBuildStats build_bm25_index(const std::string& corpus_path, const std::string& out_dir,
                                 BadLinePolicy policy);
IndexBuildStats build_bm25_index(const std::vector<CorpusDoc>& docs, const std::string& out_dir);

class Bm25Index final : public Retriever {
 public:
  // Opens an index built by build_bm25_index; kNotFound / kBadFormat if dir is not one.
  explicit Bm25Index(const std::string& dir);
  ~Bm25Index() override;

  std::vector<std::vector<RetrievedDoc>> search(const std::vector<std::string>& queries,
                                                int topk) const override;
  std::vector<RetrievedDoc> search_one(const std::string& query, int topk) const;
  int64_t size() const { return documents_; }

  // Queries longer than this many bytes are cut (at a UTF-8 boundary) so that a huge query
  // cannot stall the server; 4 KiB is far beyond any useful search.
  static constexpr size_t kMaxQueryBytes = 4096;
  static constexpr int kMaxTopk = 1000;

 private:
  // Xapian::Database is not thread-safe: each search borrows a handle from this pool.
  std::unique_ptr<Xapian::Database> acquire() const;
  void release(std::unique_ptr<Xapian::Database> db) const;

  std::string dir_;
  int64_t documents_ = 0;
  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<Xapian::Database>> pool_;
};

}  // namespace stoa::env
