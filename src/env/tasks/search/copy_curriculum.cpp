#include "env/tasks/search/copy_curriculum.h"

#include "core/error.h"
#include "env/tasks/search/search_protocol.h"

namespace stoa::env {
namespace {

// One ChatML exchange rendered as the SFT loader renders {"messages": [user, assistant]}: each
// piece encoded on its own, the assistant's content and its <|im_end|> trained.
Demonstration exchange(const std::string& id, const std::string& user, const std::string& assistant,
                       const TokenCodec& codec) {
  Demonstration d;
  d.id = id;
  auto add = [&](std::string_view text, uint8_t trained) {
    const std::vector<int32_t> ids = codec.encode(text);
    d.tokens.insert(d.tokens.end(), ids.begin(), ids.end());
    d.mask.insert(d.mask.end(), ids.size(), trained);
  };
  add("<|im_start|>user\n", 0);
  add(user, 0);
  add("<|im_end|>", 0);
  add("\n", 0);
  add("<|im_start|>assistant\n", 0);
  add(assistant, 1);
  add("<|im_end|>", 1);
  add("\n", 0);
  if (!d.mask.empty()) d.mask[0] = 0;
  return d;
}

}  // namespace

std::vector<Demonstration> make_copy_curriculum(
    const std::vector<QaItem>& train,
    const std::function<const CorpusDoc*(const std::string& pmid)>& paper_of,
    const TokenCodec& codec, CurriculumStats* stats) {
  STOA_CHECK(codec.chat_ml(), ErrorKind::kInvalidArgument,
             "copy curriculum: the tokenizer has no <|im_start|>/<|im_end|> (ChatML) tokens");
  for (const QaItem& item : train) {
    STOA_CHECK(item.split == "train", ErrorKind::kInvalidArgument, "copy curriculum: item '",
               item.id, "' is from split '", item.split, "'; only train items may become SFT data");
  }
  std::vector<Demonstration> out;
  CurriculumStats st;
  for (const QaItem& item : train) {
    const std::string question = "Question: " + item.question;
    if (!item.subject_mention.empty() && !item.relation_keyword.empty()) {
      out.push_back(exchange(
          "copy-query-" + item.id, question,
          "<search> " + item.subject_mention + " " + item.relation_keyword + " </search>", codec));
      st.query_examples++;
    }
    const CorpusDoc* paper = item.pmid.empty() ? nullptr : paper_of(item.pmid);
    if (paper != nullptr) {
      const std::string docs(strip_ascii(format_documents({{paper->id, paper->contents, 0.0}})));
      const std::string answer = item.answer.empty() ? item.golden_answers.at(0) : item.answer;
      out.push_back(exchange("copy-answer-" + item.id,
                             question + "\n<information>" + docs + "</information>",
                             "<answer> " + answer + " </answer>", codec));
      st.answer_examples++;
    }
  }
  for (const Demonstration& d : out) {
    st.tokens += static_cast<int64_t>(d.tokens.size());
    for (uint8_t m : d.mask) st.trained_tokens += m;
  }
  if (stats) *stats = st;
  return out;
}

}  // namespace stoa::env
