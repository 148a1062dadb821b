// PaperSearchQA-mini: a seeded generator of a synthetic biomedical abstract corpus and factoid QA
// set in the shapes of PaperSearchQA / Search-R1 (see docs/tasks.md for the design and measured
// statistics). Deterministic across machines: one seed gives byte-identical files everywhere.
//
// The world: entities (genes, proteins, diseases, drugs, cell types, organisms, methods) with
// pronounceable names and aliases, and facts (subject, relation, object-or-quantity). Each fact is
// the finding of exactly one paper. Papers about the same subject (its other facts) and papers
// that mention the same entities in passing are the distractors. Splits are drawn by SUBJECT:
// every fact of a subject lands in one split, so validation/test papers state no fact that any
// training question asks about.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "env/dataset.h"

namespace stoa::env {

struct MiniConfig {
  int papers = 20000;     // corpus size (one paper per fact)
  int questions = 10000;  // over all splits
  uint64_t seed = 1;
  double validation_fraction = 0.1;
  double test_fraction = 0.1;
  double paraphrase_fraction = 0.5;
};

// What the generator knows about a question beyond its JSONL record (for measurements/tests).
struct MiniQuestionInfo {
  int fact = -1;
  bool paraphrased = false;
  std::string subject_mention;   // the subject as the question names it (name or alias)
  std::string relation_keyword;  // the words papers use for the relation ("half-life")
  std::string oracle_query;      // canonical subject name + relation_keyword
};

struct MiniDataset {
  std::vector<CorpusDoc> corpus;
  std::vector<QaItem> train, validation, test;
  // Parallel to train/validation/test.
  std::vector<MiniQuestionInfo> train_info, validation_info, test_info;
  std::vector<std::vector<int>> paper_facts;  // per corpus doc: the facts it states
};

MiniDataset generate_papersearchqa_mini(const MiniConfig& config);

// Writes corpus.jsonl, train.jsonl, validation.jsonl, test.jsonl into dir (created).
void write_papersearchqa_mini(const MiniDataset& data, const std::string& dir);

}  // namespace stoa::env
