// SFT transcripts (torch-free): one JSON object per line, in any of three forms.
//
//   {"id": "a", "tokens": [1, 2, 3, 4], "mask": [0, 0, 1, 1]}   pre-tokenised; mask[t] = 1 trains
//                                                               on tokens[t] (default: all but t=0)
//   {"id": "b", "prompt": "2+2=", "completion": "4"}            loss on the completion (+ EOS)
//   {"id": "c", "messages": [{"role": "user", "content": "hi"},
//                            {"role": "assistant", "content": "hello"}]}
//                                                               ChatML (<|im_start|>role\n...
//                                                               <|im_end|>\n, as Qwen3 and LFM2
//                                                               use); loss on assistant turns
//                                                               and their <|im_end|>
// Text forms are tokenised with the model directory's tokenizer.json. "id" is optional (the
// line number stands in). Errors name the file, line and field.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "train/trainer.h"

namespace stoa::train {

struct SftDataOptions {
  int64_t vocab_size = 0;
  int32_t eos_token_id = -1;             // appended to prompt/completion examples when >= 0
  const Tokenizer* tokenizer = nullptr;  // needed by the text forms only
};

std::vector<SftExample> parse_sft_jsonl(const std::string& text, const std::string& source,
                                        const SftDataOptions& options);
std::vector<SftExample> load_sft_jsonl(const std::string& path, const SftDataOptions& options);

// Groups examples (in the given order) into batches of at most `batch_tokens` tokens (a longer
// example forms its own batch).
std::vector<std::vector<SftExample>> batch_by_tokens(const std::vector<SftExample>& examples,
                                                     int64_t batch_tokens);

}  // namespace stoa::train
