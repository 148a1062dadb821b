// Exact-match reward for short factoid answers, following Search-R1's / SQuAD's normalize_answer:
// lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace; then compare with
// every golden answer. We extend "punctuation" from Python's ASCII string.punctuation to every
// Unicode punctuation category (P*) so that "“Borvex”" and "Borvex" match, and we lower-case with
// Unicode rules (as Python's str.lower does).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace stoa::env {

// Normalised form of an answer; invalid UTF-8 bytes are dropped rather than rejected, because the
// text comes from a model and must never make reward computation fail.
std::string normalize_answer(std::string_view text);

// True when normalize_answer(prediction) equals normalize_answer(g) for some golden answer g.
bool exact_match(std::string_view prediction, const std::vector<std::string>& golden_answers);

}  // namespace stoa::env
