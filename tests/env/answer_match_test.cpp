// normalize_answer against the behaviour of Search-R1's Python normalize_answer (values computed
// with Python 3 for the ASCII and Unicode-lowercase cases), plus our Unicode punctuation extension.
#include <gtest/gtest.h>

#include "env/answer_match.h"

namespace stoa::env {
namespace {

TEST(NormalizeAnswer, Table) {
  const std::pair<const char*, const char*> cases[] = {
      {"The Borvex", "borvex"},
      {"  a   b  ", "b"},  // "a" is an article
      {"An apple", "apple"},
      {"theory", "theory"},   // articles only as whole words
      {"the-the", "thethe"},  // punctuation goes first, so no article is left
      {"Anna", "anna"},
      {"A.B.C.", "abc"},
      {"IL-6", "il6"},
      {"12 h.", "12 h"},
      {"$5 + 3%", "5 3"},
      {"tab\tand\nnewline", "tab and newline"},
      {"Ärzte ÜBER", "ärzte über"},      // Unicode lower-casing
      {"“Borvex”", "borvex"},            // curly quotes (Unicode Pi/Pf)
      {"«Borvex»—l’ami", "borvexlami"},  // guillemets, em dash, right single quote
      {"α-synuclein", "αsynuclein"},
      {"¿Qué?", "qué"},
      {"Borvex\u00a0gene", "borvex gene"},  // no-break space is whitespace
      {"", ""},
      {"the", ""},
      {"a an the", ""},
      {"théâtre the", "théâtre"},
      {"A_B", "ab"},  // underscore is in Python's string.punctuation
  };
  for (const auto& [in, out] : cases) {
    EXPECT_EQ(normalize_answer(in), out) << in;
  }
}

TEST(NormalizeAnswer, InvalidUtf8NeverThrows) {
  const std::string bad[] = {std::string("\xff\xfe", 2), std::string("ab\xc3", 3),
                             std::string("\x00the\x00", 5), std::string("\xed\xa0\x80", 3)};
  for (const auto& s : bad) EXPECT_NO_THROW(normalize_answer(s));
  EXPECT_EQ(normalize_answer(std::string("ab\xc3", 3)), "ab");
}

TEST(ExactMatch, AnyGoldenAnswer) {
  EXPECT_TRUE(exact_match("the MITU9", {"Mitulin 9", "MITU9"}));
  EXPECT_FALSE(exact_match("MITU", {"Mitulin 9", "MITU9"}));
  EXPECT_FALSE(exact_match("x", {}));
}

}  // namespace
}  // namespace stoa::env
