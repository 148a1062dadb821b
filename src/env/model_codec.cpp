#include "env/model_codec.h"

#include <filesystem>

#include "core/error.h"
#include "env/tokenizer_codec.h"
#include "model/chat_template.h"
#include "model/tokenizer.h"

namespace stoa::env {

ModelCodec load_model_codec(const std::string& model_dir, const ModelConfig& config,
                            const std::string& who) {
  ModelCodec out;
  const std::string tok_path = model_dir + "/tokenizer.json";
  if (std::filesystem::exists(tok_path)) {
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
               " has no tokenizer.json and a vocabulary under 256 (byte-level fallback)");
    out.sample_vocab = 256;
    out.codec = std::make_unique<ByteCodec>();
  }
  return out;
}

}  // namespace stoa::env
