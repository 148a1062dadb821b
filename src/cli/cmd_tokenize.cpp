// `stoa tokenize --tokenizer FILE [--decode] [--add-special] [--skip-special] [--skip-bad-lines]`
//
// Encode (default): each stdin line is a JSON string; writes one JSON array of ids per line.
// --decode: each line is a JSON array of ids; writes one JSON string per line.
// A bad line (not JSON, wrong type, an id outside the vocabulary) stops with an error naming the
// line number and exit status 1, after the answers to the lines before it. With --skip-bad-lines
// it writes `null` for that line instead (so output line N still answers input line N), warns on
// stderr and exits 3 at the end if any line was skipped. Output is flushed per line, so the
// command can serve as a pipe co-process.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "model/tokenizer.h"

namespace stoa::cli {
namespace {

struct Options {
  std::string tokenizer;
  bool decode = false;
  bool add_special = false;
  bool skip_special = false;
  bool skip_bad_lines = false;
};

std::string answer(const Tokenizer& tok, const Options& opt, const std::string& line) {
  nlohmann::json in;
  try {
    in = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kInvalidArgument, "not valid JSON: ", e.what());
  }
  if (!opt.decode) {
    if (!in.is_string()) fail(ErrorKind::kInvalidArgument, "expected a JSON string");
    return nlohmann::json(tok.encode(in.get_ref<const std::string&>(), opt.add_special)).dump();
  }
  if (!in.is_array()) fail(ErrorKind::kInvalidArgument, "expected a JSON array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(in.size());
  for (const auto& v : in) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
      fail(ErrorKind::kInvalidArgument, "element ", v.dump(), " is not a token id");
    }
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  // decode() already repairs ill-formed UTF-8, so dump() cannot meet invalid bytes.
  return nlohmann::json(tok.decode(ids, opt.skip_special)).dump();
}

int run(const Options& opt) {
  Tokenizer tok = Tokenizer::from_file(opt.tokenizer);
  std::ios::sync_with_stdio(false);
  std::string line;
  int64_t line_no = 0, skipped = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string out;
    try {
      out = answer(tok, opt, line);
    } catch (const Error& e) {
      if (!opt.skip_bad_lines) {
        std::cout.flush();
        fail(ErrorKind::kInvalidArgument, "stdin line ", line_no, ": ", e.what());
      }
      std::fprintf(stderr, "stoa tokenize: skipping stdin line %lld: %s\n",
                   static_cast<long long>(line_no), e.what());
      out = "null";
      ++skipped;
    }
    std::cout << out << '\n';
    std::cout.flush();
  }
  return skipped > 0 ? 3 : 0;
}

CommandRegistration reg(
    "tokenize", "Encode JSON strings (or decode id arrays) line by line", [](CLI::App& app) {
      auto opt = std::make_shared<Options>();
      app.add_option("--tokenizer", opt->tokenizer, "tokenizer.json")->required();
      app.add_flag("--decode", opt->decode, "Read JSON id arrays, write JSON strings");
      app.add_flag("--add-special", opt->add_special, "Apply the post-processor template (encode)");
      app.add_flag("--skip-special", opt->skip_special, "Drop special tokens (decode)");
      app.add_flag("--skip-bad-lines", opt->skip_bad_lines,
                   "Answer a bad line with null instead of stopping");
      return [opt] { return run(*opt); };
    });

}  // namespace
}  // namespace stoa::cli
