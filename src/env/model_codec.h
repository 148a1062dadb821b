// The one rule by which every role turns a model directory into the codec its prompts are
// rendered and its transcripts decoded with, and the ids it may sample. The worker samples, the
// hub decodes what it sampled, a validator replays it and `stoa eval` scores it: exact replay
// holds only while all four agree, so they all call this and nothing else.
//
// The rule: the directory's tokenizer.json — with the model's chat template
// (model/chat_template.h) when the directory has one — or one token per byte when its config.json
// says so ("stoa_tokenizer": "bytes", ModelConfig::byte_tokens; the vocabulary must then hold ids
// 0..255). A directory with neither is refused, never silently read as bytes. Sampling is limited
// to the ids the codec can decode — an embedding table is often padded past the tokenizer
// (Qwen3: 151,936 rows, 151,669 tokens), and a token no codec can decode would be rejected by
// the hub. A tokenizer larger than the model's vocabulary is refused: its ids past the embedding
// table would index outside it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "env/token_codec.h"
#include "model/config.h"

namespace stoa::env {

struct ModelCodec {
  std::unique_ptr<TokenCodec> codec;
  int64_t sample_vocab = 0;  // ids [0, sample_vocab) may be sampled
};

// kNotFound (naming `who`, the directory and where a tokenizer comes from) for a directory with
// no tokenizer.json whose config does not say its tokens are bytes; kBadFormat for a tokenizer
// larger than config.vocab_size or one beside "stoa_tokenizer": "bytes"; whatever
// Tokenizer::from_file throws for a bad tokenizer.json.
ModelCodec load_model_codec(const std::string& model_dir, const ModelConfig& config,
                            const std::string& who);

// Where a model's tokenizer comes from, in words (the refusal above, `stoa model init`).
std::string missing_tokenizer_advice();

}  // namespace stoa::env
