// The model `stoa generate` runs when no --model is given: a tiny LFM2 with seeded random
// weights and a byte-level BPE tokenizer trained at start-up on a short biomedical text built
// into the binary. It exists so the command (and the README's first command) works on a fresh
// machine with no download; its output is fluent-looking noise until the demo replaces it with
// a trained model.
#pragma once
#include <string>

#include "model/tokenizer.h"
#include "model/weights.h"

namespace stoa::engine {

struct EmbeddedModel {
  ModelWeights weights;
  Tokenizer tokenizer;
  std::string description;
};

EmbeddedModel load_embedded_model();

// The built-in training text (a few paragraphs of biomedical-sounding prose).
const std::string& embedded_corpus();

}  // namespace stoa::engine
