#include "env/tasks/search/demonstrations.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/jsonl.h"
#include "core/rng.h"
#include "env/tasks/search/search_protocol.h"

namespace stoa::env {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The question's own words, without the trailing "?": BM25 does well on them.
// The short "subject + relation" query when the generator recorded them (recall@3 of the gold
// paper ~0.99 on PaperSearchQA-mini, against ~0.6 for the whole question, and a 2-5 token copy a
// small model learns far sooner than a 20-token one); the question's own words otherwise.
std::string good_query_for(const QaItem& item) {
  if (!item.subject_mention.empty() && !item.relation_keyword.empty())
    return item.subject_mention + " " + item.relation_keyword;
  std::string q(strip_ascii(item.question));
  while (!q.empty() && (q.back() == '?' || q.back() == ' ')) q.pop_back();
  return q;
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-') {
      cur += c;
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// A poor query: two or three words from another question, so retrieval usually misses.
std::string poor_query_for(const std::vector<QaItem>& items, size_t self, Rng& rng) {
  size_t other = items.size() > 1 ? rng.below(items.size() - 1) : 0;
  if (items.size() > 1 && other >= self) other++;
  auto w = words(items[other].question);
  if (w.empty()) return "study";
  const size_t n = std::min<size_t>(w.size(), static_cast<size_t>(rng.range(2, 3)));
  const size_t start = w.size() > n ? rng.below(w.size() - n + 1) : 0;
  std::string q;
  for (size_t i = start; i < start + n; i++) q += (q.empty() ? "" : " ") + w[i];
  return q;
}

bool contains_any(const std::string& haystack, const std::vector<std::string>& needles) {
  const std::string h = lower(haystack);
  for (const auto& n : needles) {
    if (!n.empty() && h.find(lower(n)) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::vector<Demonstration> make_demonstrations(const std::vector<QaItem>& train, const Task& task,
                                               const TokenCodec& codec, const DemoOptions& options,
                                               DemoStats* stats) {
  for (double p : {options.good_query, options.answer_when_found, options.answer_when_missing}) {
    STOA_CHECK(p >= 0 && p <= 1, ErrorKind::kInvalidArgument,
               "demonstrations: probabilities must be in [0, 1], got ", p);
  }
  STOA_CHECK(options.episode.max_turns >= 1, ErrorKind::kInvalidArgument,
             "demonstrations: max_turns must be >= 1 (a search turn needs a tool turn)");
  // Refuse up front, before anything is generated: validation/test must never reach SFT data.
  std::map<std::string, std::vector<std::string>> answers_by_category;
  for (const auto& item : train) {
    STOA_CHECK(item.split == "train", ErrorKind::kInvalidArgument, "demonstrations: item '",
               item.id, "' is from split '", item.split,
               "'; only train items may become demonstrations");
    STOA_CHECK(!item.golden_answers.empty(), ErrorKind::kInvalidArgument, "demonstrations: item '",
               item.id, "' has no golden answer");
    answers_by_category[item.category].push_back(item.answer.empty() ? item.golden_answers[0]
                                                                     : item.answer);
  }

  Rng root(options.seed, 0);
  std::vector<Demonstration> out;
  out.reserve(train.size());
  DemoStats st;
  for (size_t i = 0; i < train.size(); i++) {
    const QaItem& item = train[i];
    Rng rng = root.fork(i);
    Demonstration d;
    d.id = "demo-" + item.id;
    d.good_query = rng.chance(options.good_query);
    const std::string query = d.good_query ? good_query_for(item) : poor_query_for(train, i, rng);

    Episode ep(task, item, codec, options.episode);
    const std::string turn1 =
        "<think> I need to search for information to answer this. </think>\n"
        "<search> " +
        query + " </search>";
    Decision dec = ep.step(codec.encode(turn1));
    const std::string observation = codec.decode(dec.appended);
    d.found = contains_any(observation, item.golden_answers);

    std::string answer;
    const bool right =
        rng.chance(d.found ? options.answer_when_found : options.answer_when_missing);
    if (right) {
      answer = item.answer.empty() ? item.golden_answers[0] : item.answer;
    } else {
      // A wrong answer of the right kind: another question's answer from the same category that
      // is not one of this item's golden answers; a clear non-answer if there is none.
      const auto& pool = answers_by_category[item.category];
      answer = "unknown";
      for (int attempt = 0; attempt < 8 && !pool.empty(); attempt++) {
        const std::string& cand = pool[rng.below(pool.size())];
        if (!contains_any(cand, item.golden_answers) &&
            !contains_any(lower(cand), {lower(item.golden_answers[0])})) {
          answer = cand;
          break;
        }
      }
    }
    const std::string think =
        d.found
            ? "<think> The documents mention the answer. </think>\n"
            : "<think> The documents do not say it directly; I will give my best guess. </think>\n";
    if (!ep.done()) ep.step(codec.encode(think + "<answer> " + answer + " </answer>"));
    d.correct = ep.reward() > 0.5;
    d.tokens = ep.tokens();
    d.mask = ep.loss_mask();

    st.demonstrations++;
    st.good_queries += d.good_query;
    st.found += d.found;
    st.correct += d.correct;
    st.tokens += static_cast<int64_t>(d.tokens.size());
    for (uint8_t m : d.mask) st.trained_tokens += m;
    out.push_back(std::move(d));
  }
  if (stats) *stats = st;
  return out;
}

void write_demonstrations_jsonl(const std::vector<Demonstration>& demos, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    JsonlWriter f(tmp, JsonlWriter::Mode::kTruncate);
    for (const auto& d : demos) f.write({{"id", d.id}, {"tokens", d.tokens}, {"mask", d.mask}});
    f.flush();
  }
  STOA_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, ErrorKind::kIo,
             "demonstrations: cannot rename ", tmp, " to ", path);
}

}  // namespace stoa::env
