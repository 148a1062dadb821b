// The two data shapes of the search task, as Search-R1 and PaperSearchQA publish them:
//   corpus JSONL: {"id": "...", "contents": "Title\nabstract"} per line;
//   QA JSONL:     {"id", "question", "golden_answers": [..], "answer", "category", "pmid",
//                  "paper_title", "split"} per line (only question and golden_answers are required;
//                  Search-R1's NQ/HotpotQA files carry just those).
#pragma once
#include <string>
#include <vector>

#include "env/jsonl.h"

namespace stoa::env {

struct CorpusDoc {
  std::string id;
  std::string contents;  // "Title\nbody"
};

struct QaItem {
  std::string id;
  std::string question;
  std::vector<std::string> golden_answers;
  std::string answer;    // the canonical answer (defaults to golden_answers[0])
  std::string category;  // e.g. "drug-treats-disease"; free text for real data
  std::string pmid;      // the source paper's corpus id, when known
  std::string paper_title;
  std::string split;
  // Generator metadata (PaperSearchQA-mini only; empty for real data): how the question names its
  // subject and the words papers use for the relation. Scripted demonstrations build their short
  // "subject + relation" search query from them; a model never sees these fields.
  std::string subject_mention;
  std::string relation_keyword;
};

// Parses one record; throws kBadFormat naming the field at fault.
CorpusDoc corpus_doc_from_json(const nlohmann::json& record);
QaItem qa_item_from_json(const nlohmann::json& record);
nlohmann::json to_json(const CorpusDoc& doc);
nlohmann::json to_json(const QaItem& item);

// Streams a corpus file (it may hold millions of abstracts; nothing is kept in memory).
JsonlStats for_each_corpus_doc(const std::string& path, BadLinePolicy policy,
                               const std::function<void(CorpusDoc&&)>& visit);
std::vector<CorpusDoc> load_corpus(const std::string& path, BadLinePolicy policy);
std::vector<QaItem> load_qa(const std::string& path, BadLinePolicy policy);

// Writes records one per line (core/jsonl.h); throws kIo on failure.
using stoa::write_jsonl;

}  // namespace stoa::env
