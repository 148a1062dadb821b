// Runs the JS oracle (tests/model/tokenizer_oracle.mjs on @huggingface/tokenizers) from a gtest.
// When node or the npm package is missing this throws with a message saying what to install: the
// oracle tests must fail loudly, never skip.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

namespace stoa::test {

inline std::string env_or_throw(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) throw std::runtime_error(std::string(name) + " is not set (run through ctest)");
  return v;
}

inline std::string find_node() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::filesystem::path candidate = std::filesystem::path(dir) / "node";
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  throw std::runtime_error(
      "node is not on PATH: the tokenizer oracle needs Node.js (apt-get install nodejs; "
      "scripts/setup installs it)");
}

inline std::string npm_module(const std::string& relative) {
  std::filesystem::path p =
      std::filesystem::path(env_or_throw("STOA_DEPS_DIR")) / "npm" / "node_modules" / relative;
  if (!std::filesystem::exists(p)) {
    throw std::runtime_error("missing " + p.string() +
                             ": run scripts/setup to install the pinned npm oracle packages");
  }
  return p.string();
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Sends requests ({"text": ...} or {"ids": [...]}) to the oracle; returns one answer per request.
inline std::vector<nlohmann::json> run_oracle(const std::string& tokenizer_json,
                                              const std::string& config_json,
                                              const std::vector<nlohmann::json>& requests,
                                              const std::string& work_dir) {
  std::string node = find_node();
  std::string module = npm_module("@huggingface/tokenizers/dist/tokenizers.mjs");
  std::string script = env_or_throw("STOA_SOURCE_DIR") + "/tests/model/tokenizer_oracle.mjs";
  std::filesystem::create_directories(work_dir);
  std::string in = work_dir + "/requests.jsonl", out = work_dir + "/answers.jsonl",
              err = work_dir + "/oracle.stderr";
  {
    std::ofstream f(in, std::ios::binary);
    for (const auto& r : requests) f << r.dump() << "\n";
  }
  std::string cmd = shell_quote(node) + " " + shell_quote(script) + " " + shell_quote(module) +
                    " " + shell_quote(tokenizer_json) + " " + shell_quote(config_json) + " " +
                    shell_quote(in) + " " + shell_quote(out) + " 2> " + shell_quote(err);
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream e(err);
    std::stringstream msg;
    msg << e.rdbuf();
    throw std::runtime_error("oracle failed (rc " + std::to_string(rc) + "): " + cmd + "\n" +
                             msg.str());
  }
  std::vector<nlohmann::json> answers;
  std::ifstream f(out, std::ios::binary);
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) answers.push_back(nlohmann::json::parse(line));
  if (answers.size() != requests.size()) {
    throw std::runtime_error("oracle answered " + std::to_string(answers.size()) + " of " +
                             std::to_string(requests.size()) + " requests");
  }
  return answers;
}

}  // namespace stoa::test
