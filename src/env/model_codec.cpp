#include "env/model_codec.h"

#include <filesystem>

#include "core/error.h"
#include "env/tokenizer_codec.h"
#include "model/chat_template.h"
#include "model/tokenizer.h"

namespace stoa::env {

std::string missing_tokenizer_advice() {
  return "train one with `stoa tokenizer train --corpus FILE --vocab-size N --out DIR` and pass "
         "`--tokenizer DIR` to `stoa model init` (or copy DIR/tokenizer.json and "
         "DIR/tokenizer_config.json into the model directory), or copy the Hugging Face "
         "model's tokenizer.json and tokenizer_config.json; a model whose tokens are bytes on "
         "purpose says so in its config.json: \"stoa_tokenizer\": \"bytes\" (`stoa model init "
         "--tokenizer bytes`)";
}

ModelCodec load_model_codec(const std::string& model_dir, const ModelConfig& config,
                            const std::string& who) {
  ModelCodec out;
  const std::string tok_path = model_dir + "/tokenizer.json";
  const bool has_tokenizer = std::filesystem::exists(tok_path);
  // Bytes only when the model says so: a tokenizer left out by mistake would otherwise train
  // and sample on bytes without a word, and the run would learn nothing a user expected.
  STOA_CHECK(has_tokenizer || config.byte_tokens, ErrorKind::kNotFound, who, ": ", model_dir,
             " has no tokenizer.json: ", missing_tokenizer_advice());
  STOA_CHECK(!(has_tokenizer && config.byte_tokens), ErrorKind::kBadFormat, who, ": ", model_dir,
             " has a tokenizer.json but its config.json says \"stoa_tokenizer\": \"bytes\": "
             "remove one of the two");
  if (has_tokenizer) {
    Tokenizer tok = Tokenizer::from_file(tok_path);
    STOA_CHECK(tok.vocab_size() <= config.vocab_size, ErrorKind::kBadFormat, who, ": tokenizer ",
               tok_path, " has ", tok.vocab_size(), " tokens but the model's vocabulary is ",
               config.vocab_size);
    out.sample_vocab = tok.vocab_size();
    // The model's chat template when its directory has one (tokenizer_config.json's
    // chat_template or chat_template.jinja): every role renders prompts through the same one.
    out.codec =
        std::make_unique<TokenizerCodec>(std::move(tok), ChatTemplate::from_model_dir(model_dir));
  } else {
    STOA_CHECK(config.vocab_size >= 256, ErrorKind::kBadFormat, who, ": ", model_dir,
               " says its tokens are bytes but its vocabulary is under 256");
    out.sample_vocab = 256;
    out.codec = std::make_unique<ByteCodec>();
  }
  return out;
}

}  // namespace stoa::env
