// `--task-option KEY=VALUE` (repeatable) and its two shorthands for the search task, `--index DIR`
// and `--search-url URL`, for the commands that build the run's task on their own machine (`stoa
// work`, `stoa validate`): the hub names the task and sends the run's options; these say where
// this machine's tools are (env::TaskKeys::local). `stoa eval` builds the whole task itself, so
// there any of the task's keys may be given. Header-only: three small commands share it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "env/task_registry.h"

namespace stoa::cli {

class TaskOptionFlags {
 public:
  static constexpr const char* kLocalOptionHelp =
      "KEY=VALUE: an option of the run's task that is this machine's own (where its tools are); "
      "repeatable";
  void add_to(CLI::App& app, const std::string& option_help = kLocalOptionHelp) {
    app.add_option("--task-option", pairs_, option_help);
    app.add_option("--index", index_, "search task: local search index directory");
    app.add_option("--search-url", search_url_, "search task: retrieval server URL");
  }
  // kInvalidArgument for a pair without '=' or an empty key, and for a key given twice.
  env::TaskOptions options() const {
    env::TaskOptions out;
    auto put = [&out](const std::string& key, const std::string& value) {
      STOA_CHECK(!out.has(key), ErrorKind::kInvalidArgument, "task option '", key,
                 "' is given twice");
      out.set(key, value);
    };
    for (const auto& pair : pairs_) {
      const size_t eq = pair.find('=');
      STOA_CHECK(eq != std::string::npos && eq > 0, ErrorKind::kInvalidArgument,
                 "--task-option wants KEY=VALUE, got '", pair, "'");
      put(pair.substr(0, eq), pair.substr(eq + 1));
    }
    if (!index_.empty()) put("index", index_);
    if (!search_url_.empty()) put("search_url", search_url_);
    return out;
  }

 private:
  std::vector<std::string> pairs_;
  std::string index_, search_url_;
};

}  // namespace stoa::cli
