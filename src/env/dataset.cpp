#include "env/dataset.h"

#include "core/error.h"
#include "env/strip_ascii.h"

namespace stoa::env {
namespace {

std::string optional_string(const nlohmann::json& record, const char* field) {
  auto it = record.find(field);
  if (it == record.end() || it->is_null()) return {};
  return json_string(record, field);
}

}  // namespace

CorpusDoc corpus_doc_from_json(const nlohmann::json& record) {
  CorpusDoc doc;
  doc.id = json_id(record, "id");
  // Some Search-R1 corpora split title and text; accept that shape and rebuild "Title\ntext".
  if (record.contains("contents")) {
    doc.contents = json_string(record, "contents");
  } else if (record.contains("title") && record.contains("text")) {
    doc.contents = json_string(record, "title") + "\n" + json_string(record, "text");
  } else {
    fail(ErrorKind::kBadFormat, "missing field \"contents\"");
  }
  return doc;
}

QaItem qa_item_from_json(const nlohmann::json& record) {
  QaItem item;
  item.question = json_string(record, "question");
  STOA_CHECK(!strip_ascii(item.question).empty(), ErrorKind::kBadFormat, "empty \"question\"");
  auto golden = record.find("golden_answers");
  STOA_CHECK(golden != record.end(), ErrorKind::kBadFormat, "missing field \"golden_answers\"");
  if (golden->is_string()) {
    item.golden_answers.push_back(golden->get<std::string>());
  } else {
    STOA_CHECK(golden->is_array(), ErrorKind::kBadFormat,
               "field \"golden_answers\" is neither a list nor a string");
    for (const auto& g : *golden) {
      if (g.is_string()) {
        item.golden_answers.push_back(g.get<std::string>());
      } else if (g.is_number()) {  // NQ has numeric answers stored as numbers now and then
        item.golden_answers.push_back(g.dump());
      } else {
        fail(ErrorKind::kBadFormat, "field \"golden_answers\" holds a non-string element");
      }
    }
  }
  STOA_CHECK(!item.golden_answers.empty(), ErrorKind::kBadFormat, "\"golden_answers\" is empty");
  if (record.contains("id") && !record["id"].is_null()) item.id = json_id(record, "id");
  item.answer = optional_string(record, "answer");
  if (item.answer.empty()) item.answer = item.golden_answers.front();
  item.category = optional_string(record, "category");
  if (record.contains("pmid") && !record["pmid"].is_null()) item.pmid = json_id(record, "pmid");
  item.paper_title = optional_string(record, "paper_title");
  item.split = optional_string(record, "split");
  item.subject_mention = optional_string(record, "subject_mention");
  item.relation_keyword = optional_string(record, "relation_keyword");
  return item;
}

nlohmann::json to_json(const CorpusDoc& doc) {
  return {{"id", doc.id}, {"contents", doc.contents}};
}

nlohmann::json to_json(const QaItem& item) {
  nlohmann::json j = {{"id", item.id},
                      {"question", item.question},
                      {"golden_answers", item.golden_answers},
                      {"answer", item.answer},
                      {"category", item.category},
                      {"pmid", item.pmid},
                      {"paper_title", item.paper_title},
                      {"split", item.split}};
  if (!item.subject_mention.empty()) j["subject_mention"] = item.subject_mention;
  if (!item.relation_keyword.empty()) j["relation_keyword"] = item.relation_keyword;
  return j;
}

JsonlStats for_each_corpus_doc(const std::string& path, BadLinePolicy policy,
                               const std::function<void(CorpusDoc&&)>& visit) {
  return read_jsonl(path, policy, [&](const nlohmann::json& record, int64_t) {
    visit(corpus_doc_from_json(record));
  });
}

std::vector<CorpusDoc> load_corpus(const std::string& path, BadLinePolicy policy) {
  std::vector<CorpusDoc> docs;
  for_each_corpus_doc(path, policy, [&](CorpusDoc&& doc) { docs.push_back(std::move(doc)); });
  return docs;
}

std::vector<QaItem> load_qa(const std::string& path, BadLinePolicy policy) {
  std::vector<QaItem> items;
  read_jsonl(path, policy, [&](const nlohmann::json& record, int64_t line) {
    items.push_back(qa_item_from_json(record));
    // Search-R1 files often lack ids; the line number is stable and unique within the file.
    if (items.back().id.empty()) items.back().id = "line" + std::to_string(line);
  });
  return items;
}

}  // namespace stoa::env
