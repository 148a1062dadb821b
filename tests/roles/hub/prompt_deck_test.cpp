// The hub's training prompts (roles/hub/prompts/prompt_deck.h): the order is a seeded
// permutation, the same for the same seed; a prompt is rendered only when asked to be, never
// behind the caller's back; the prompts too long for max_tokens are skipped for good while the
// cursor stays on the one dealt; a restored cursor continues where the last start stopped.
#include "roles/hub/prompts/prompt_deck.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace stoa::hub {
namespace {

// A prompt of `index + 1` tokens; counts the renderings.
struct CountingRenderer {
  int* calls;
  std::vector<int32_t> operator()(int64_t index) const {
    ++*calls;
    return std::vector<int32_t>(static_cast<size_t>(index + 1), 7);
  }
};

void render_all(PromptDeck& deck) {
  for (int64_t i = 0; i < static_cast<int64_t>(deck.size()); ++i) deck.render_here(i);
}

TEST(PromptDeck, OrderIsASeededPermutation) {
  int calls = 0;
  PromptDeck a(20, 5, CountingRenderer{&calls}), b(20, 5, CountingRenderer{&calls});
  PromptDeck other(20, 6, CountingRenderer{&calls});
  EXPECT_EQ(a.order(), b.order());
  EXPECT_NE(a.order(), other.order());
  std::vector<int64_t> sorted = a.order();
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_EQ(calls, 0);  // nothing rendered by making the deck
}

TEST(PromptDeck, RendersOnlyWhenAskedAndKeepsTheFirstTokens) {
  int calls = 0;
  PromptDeck deck(3, 1, CountingRenderer{&calls});
  EXPECT_THROW(deck.rendered(2), PromptDeck::NotRendered);
  try {
    deck.rendered(2);
  } catch (const PromptDeck::NotRendered& missing) {
    EXPECT_EQ(missing.prompt_index, 2);
  }
  // Rendered outside the lock, then kept.
  std::vector<int32_t> tokens = deck.render(2);
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(deck.is_rendered(2));  // render() keeps nothing
  deck.keep(2, tokens);
  EXPECT_EQ(deck.rendered(2).size(), 3u);
  // A second rendering that raced the first does not replace it.
  deck.keep(2, {1});
  EXPECT_EQ(deck.rendered(2).size(), 3u);
  // render_here renders once, then answers from memory.
  EXPECT_EQ(deck.render_here(0).size(), 1u);
  EXPECT_EQ(deck.render_here(0).size(), 1u);
  EXPECT_EQ(calls, 2);
}

TEST(PromptDeck, NextFittingSkipsTooLongPromptsAndStaysOnTheOneDealt) {
  int calls = 0;
  PromptDeck deck(6, 3, CountingRenderer{&calls});
  render_all(deck);
  // max_tokens 4: prompts 0..2 fit (1..3 tokens), 3..5 do not.
  std::vector<int64_t> dealt, skipped;
  for (int round = 0; round < 3; ++round) {
    auto index = deck.next_fitting(4, [&](int64_t i, int64_t length) {
      EXPECT_EQ(length, i + 1);
      skipped.push_back(i);
    });
    ASSERT_TRUE(index.has_value());
    EXPECT_EQ(deck.order()[static_cast<size_t>(deck.cursor() % 6)], *index);  // cursor on it
    EXPECT_LT(*index, 3);
    dealt.push_back(*index);
    deck.advance();
  }
  std::sort(dealt.begin(), dealt.end());
  EXPECT_EQ(dealt, (std::vector<int64_t>{0, 1, 2}));
  for (int64_t i : skipped) EXPECT_GE(i, 3);
  // No prompt fits: every one tried once, the cursor a whole round further.
  const int64_t before = deck.cursor();
  EXPECT_FALSE(deck.next_fitting(1, [](int64_t, int64_t) {}).has_value());
  EXPECT_EQ(deck.cursor(), before + 6);
}

TEST(PromptDeck, NextFittingStopsAtAPromptNotRendered) {
  int calls = 0;
  PromptDeck deck(4, 9, CountingRenderer{&calls});
  const int64_t first = deck.order()[0];
  try {
    deck.next_fitting(100, [](int64_t, int64_t) {});
    FAIL() << "a prompt not rendered must be reported";
  } catch (const PromptDeck::NotRendered& missing) {
    EXPECT_EQ(missing.prompt_index, first);
  }
  EXPECT_EQ(deck.cursor(), 0);  // it stays for the retry
  EXPECT_EQ(calls, 0);
  deck.keep(first, deck.render(first));
  EXPECT_EQ(deck.next_fitting(100, [](int64_t, int64_t) {}), first);
}

TEST(PromptDeck, ARestoredCursorContinuesTheOrder) {
  int calls = 0;
  PromptDeck first(5, 2, CountingRenderer{&calls});
  render_all(first);
  first.advance();
  first.advance();
  PromptDeck restarted(5, 2, CountingRenderer{&calls});
  render_all(restarted);
  restarted.restore_cursor(first.cursor());
  EXPECT_EQ(restarted.next_fitting(100, [](int64_t, int64_t) {}),
            first.next_fitting(100, [](int64_t, int64_t) {}));
  EXPECT_EQ(restarted.next_fitting(100, [](int64_t, int64_t) {}), first.order()[2]);
}

}  // namespace
}  // namespace stoa::hub
