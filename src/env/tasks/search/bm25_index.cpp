#include "env/tasks/search/bm25_index.h"

#include <xapian.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/log.h"

namespace stoa::env {
namespace {

constexpr const char* kFormatKey = "stoa.index";
constexpr const char* kFormatValue = "bm25-v1 english-porter2 lucene-stop";

// Lucene's EnglishAnalyzer default stop set, which Pyserini's BM25 (Search-R1's) uses.
const Xapian::SimpleStopper& stopper() {
  static const Xapian::SimpleStopper* s = [] {
    static const char* const words[] = {
        "a",   "an",    "and",  "are",   "as",    "at",   "be",   "but", "by",  "for",  "if",
        "in",  "into",  "is",   "it",    "no",    "not",  "of",   "on",  "or",  "such", "that",
        "the", "their", "then", "there", "these", "they", "this", "to",  "was", "will", "with"};
    auto* out = new Xapian::SimpleStopper(std::begin(words), std::end(words));
    return out;
  }();
  return *s;
}

// One analysis chain for documents and queries alike.
Xapian::TermGenerator make_term_generator() {
  Xapian::TermGenerator gen;
  gen.set_stemmer(Xapian::Stem("english"));
  gen.set_stemming_strategy(Xapian::TermGenerator::STEM_ALL);
  gen.set_stopper(&stopper());
  gen.set_stopper_strategy(Xapian::TermGenerator::STOP_ALL);
  return gen;
}

class IndexWriter {
 public:
  explicit IndexWriter(const std::string& dir) : gen_(make_term_generator()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    STOA_CHECK(!ec, ErrorKind::kIo, "cannot create index directory ", dir, ": ", ec.message());
    try {
      db_ = Xapian::WritableDatabase(dir, Xapian::DB_CREATE_OR_OVERWRITE);
    } catch (const Xapian::Error& e) {
      fail(ErrorKind::kIo, "cannot create index in ", dir, ": ", e.get_description());
    }
  }
  void add(const CorpusDoc& doc) {
    Xapian::Document xdoc;
    gen_.set_document(xdoc);
    gen_.index_text_without_positions(doc.contents);
    // Data: id NUL contents (ids never contain NUL; contents may contain anything else).
    std::string data = doc.id;
    data.push_back('\0');
    data += doc.contents;
    xdoc.set_data(data);
    db_.add_document(xdoc);
    ++count_;
    if (count_ % 200000 == 0) log_info("search", "indexed ", count_, " documents");
  }
  int64_t finish() {
    db_.set_metadata(kFormatKey, kFormatValue);
    db_.commit();
    db_.close();
    return count_;
  }

 private:
  Xapian::WritableDatabase db_;
  Xapian::TermGenerator gen_;
  int64_t count_ = 0;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Cuts to at most max bytes without splitting a UTF-8 sequence.
std::string_view cut_utf8(std::string_view text, size_t max) {
  if (text.size() <= max) return text;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

}  // namespace

IndexBuildStats build_bm25_index(const std::string& corpus_path, const std::string& out_dir,
                                 BadLinePolicy policy) {
  auto start = std::chrono::steady_clock::now();
  std::clock_t cpu_start = std::clock();
  IndexWriter writer(out_dir);
  JsonlStats stats;
  try {
    stats = for_each_corpus_doc(corpus_path, policy, [&](CorpusDoc&& doc) { writer.add(doc); });
  } catch (const Xapian::Error& e) {
    fail(ErrorKind::kIo, "indexing ", corpus_path, " into ", out_dir, ": ", e.get_description());
  }
  IndexBuildStats out;
  out.documents = writer.finish();
  out.skipped_lines = stats.skipped;
  out.seconds = seconds_since(start);
  out.cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  return out;
}

IndexBuildStats build_bm25_index(const std::vector<CorpusDoc>& docs, const std::string& out_dir) {
  auto start = std::chrono::steady_clock::now();
  std::clock_t cpu_start = std::clock();
  IndexWriter writer(out_dir);
  try {
    for (const auto& doc : docs) writer.add(doc);
  } catch (const Xapian::Error& e) {
    fail(ErrorKind::kIo, "indexing into ", out_dir, ": ", e.get_description());
  }
  IndexBuildStats out;
  out.documents = writer.finish();
  out.seconds = seconds_since(start);
  out.cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  return out;
}

Bm25Index::Bm25Index(const std::string& dir) : dir_(dir) {
  STOA_CHECK(std::filesystem::is_directory(dir), ErrorKind::kNotFound, "no index directory ", dir);
  std::unique_ptr<Xapian::Database> db;
  try {
    db = std::make_unique<Xapian::Database>(dir);
  } catch (const Xapian::Error& e) {
    fail(ErrorKind::kBadFormat, dir, " is not a search index: ", e.get_description());
  }
  STOA_CHECK(db->get_metadata(kFormatKey) == kFormatValue, ErrorKind::kBadFormat, dir,
             " is not a stoa BM25 index (metadata ", kFormatKey, " = \"",
             db->get_metadata(kFormatKey), "\", want \"", kFormatValue, "\")");
  documents_ = static_cast<int64_t>(db->get_doccount());
  pool_.push_back(std::move(db));
}

Bm25Index::~Bm25Index() = default;

std::unique_ptr<Xapian::Database> Bm25Index::acquire() const {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!pool_.empty()) {
      auto db = std::move(pool_.back());
      pool_.pop_back();
      return db;
    }
  }
  return std::make_unique<Xapian::Database>(dir_);
}

void Bm25Index::release(std::unique_ptr<Xapian::Database> db) const {
  std::lock_guard<std::mutex> lock(pool_mutex_);
  pool_.push_back(std::move(db));
}

std::vector<RetrievedDoc> Bm25Index::search_one(const std::string& query, int topk) const {
  std::vector<RetrievedDoc> out;
  if (topk <= 0) return out;
  topk = std::min(topk, kMaxTopk);
  // Analyse the query exactly like a document; repeated words raise the query term frequency.
  Xapian::Document scratch;
  Xapian::TermGenerator gen = make_term_generator();
  gen.set_document(scratch);
  gen.index_text_without_positions(std::string(cut_utf8(query, kMaxQueryBytes)));
  std::vector<Xapian::Query> terms;
  for (auto it = scratch.termlist_begin(); it != scratch.termlist_end(); ++it)
    terms.emplace_back(*it, it.get_wdf());
  if (terms.empty()) return out;

  auto db = acquire();
  try {
    Xapian::Enquire enquire(*db);
    enquire.set_query(Xapian::Query(Xapian::Query::OP_OR, terms.begin(), terms.end()));
    enquire.set_weighting_scheme(Xapian::BM25Weight(0.9, 0, 1, 0.4, 0.5));
    Xapian::MSet mset = enquire.get_mset(0, static_cast<Xapian::doccount>(topk));
    for (auto it = mset.begin(); it != mset.end(); ++it) {
      std::string data = it.get_document().get_data();
      size_t nul = data.find('\0');
      RetrievedDoc doc;
      doc.id = data.substr(0, nul);
      if (nul != std::string::npos) doc.contents = data.substr(nul + 1);
      doc.score = it.get_weight();
      out.push_back(std::move(doc));
    }
  } catch (const Xapian::DatabaseModifiedError&) {
    db->reopen();  // the index was rebuilt under us; the next query sees the new one
    release(std::move(db));
    return search_one(query, topk);
  } catch (const Xapian::Error& e) {
    release(std::move(db));
    fail(ErrorKind::kIo, "search in ", dir_, " failed: ", e.get_description());
  }
  release(std::move(db));
  return out;
}

std::vector<std::vector<RetrievedDoc>> Bm25Index::search(const std::vector<std::string>& queries,
                                                         int topk) const {
  std::vector<std::vector<RetrievedDoc>> out;
  out.reserve(queries.size());
  for (const auto& q : queries) out.push_back(search_one(q, topk));
  return out;
}

}  // namespace stoa::env
