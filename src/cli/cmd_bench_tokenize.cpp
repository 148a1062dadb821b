// `stoa bench tokenizer`: encode speed beside @huggingface/tokenizers (bench/tokenizer_bench.h).
#include <memory>

#include "bench/tokenizer_bench.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

CommandRegistration reg(
    "bench tokenizer", "Tokenizer encode speed beside @huggingface/tokenizers", [](CLI::App& app) {
      auto opt = std::make_shared<bench::TokenizerBenchOptions>();
      app.add_flag("--json", opt->json, "Print the report as JSON");
      app.add_option("--tokenizer", opt->tokenizer, "tokenizer.json (default: Qwen3's from .deps)");
      app.add_option("--text", opt->text, "Text file to encode (default: synthetic mix)");
      app.add_option("--mb", opt->mb, "MB of text to encode per pass");
      app.add_option("--min-seconds", opt->min_seconds, "Minimum timed seconds per side");
      return [opt] { return bench::run_tokenizer_bench(*opt); };
    });

}  // namespace
}  // namespace stoa::cli
