// A copy curriculum for the SFT warm start: short auxiliary examples that teach a small model the
// one skill the search task needs twice — copying a span from its context (the subject from the
// question into the search query; the answer out of a retrieved abstract). Full transcripts teach
// it slowly: ~13% of their tokens are trained and the rest is a ~230-token instruction. Measured on
// the 1.76M-parameter `demo` model (docs/results.md): transcripts alone left copying at zero after
// ~900 optimiser steps; with this curriculum mixed in, the subject was copied into the query in
// about a quarter of validation episodes after ~2000 steps.
//
// Two examples per TRAIN item, in ChatML exactly as the SFT loader renders "messages" (the
// assistant's content and its <|im_end|> trained):
//   query:  user "Question: Q"                                        → "<search> S K </search>"
//   answer: user "Question: Q\n<information>Doc 1(Title: T) B</information>" → "<answer> A
//   </answer>"
// where S K is the subject as the question names it and the relation keyword (items without that
// generator metadata get no query example) and T/B the gold paper (items whose paper is not in the
// corpus get no answer example). Only train items are accepted, as for the demonstrations.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "env/dataset.h"
#include "env/tasks/search/demonstrations.h"
#include "env/token_codec.h"

namespace stoa::env {

struct CurriculumStats {
  int64_t query_examples = 0;
  int64_t answer_examples = 0;
  int64_t tokens = 0;
  int64_t trained_tokens = 0;
};

// `paper_of(pmid)` returns the corpus document or nullptr. The codec must speak ChatML (a
// tokenizer with <|im_start|>/<|im_end|>); throws kInvalidArgument otherwise, or naming an item
// that is not from the train split.
std::vector<Demonstration> make_copy_curriculum(
    const std::vector<QaItem>& train,
    const std::function<const CorpusDoc*(const std::string& pmid)>& paper_of,
    const TokenCodec& codec, CurriculumStats* stats = nullptr);

}  // namespace stoa::env
