// docs/run-config.md against the parser: every key the parser knows is documented, every key the
// page documents is one the parser knows (no stale rows), every task's options are listed, and
// every `toml` example in the docs parses (a fragment is completed with the required keys first).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include "env/tasks/builtin_tasks.h"
#include "roles/run/minimal_run_config.h"
#include "roles/run/run_config.h"
#include "support/file_text.h"
#include "support/source_dir.h"

namespace stoa::run {
namespace {

namespace fs = std::filesystem;

using test::source_dir;

// The backquoted words of one table cell ("`a`, `b`" → a, b).
std::vector<std::string> quoted_words(const std::string& cell) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = cell.find('`', at)) != std::string::npos) {
    const size_t end = cell.find('`', at + 1);
    if (end == std::string::npos) break;
    out.push_back(cell.substr(at + 1, end - at - 1));
    at = end + 1;
  }
  return out;
}

std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::stringstream s(row.substr(1));
  std::string cell;
  while (std::getline(s, cell, '|')) out.push_back(cell);
  return out;
}

struct DocumentedKeys {
  std::map<std::string, std::set<std::string>> by_section;    // section → keys
  std::map<std::string, std::set<std::string>> task_options;  // task → option keys
};

// "## `[section]`" headings, then table rows whose first cell holds the keys (for [task]: the
// task, then the key).
DocumentedKeys documented_keys(const std::string& page) {
  DocumentedKeys out;
  std::string section;
  std::stringstream lines(page);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("## `[", 0) == 0) {
      section = line.substr(5, line.find(']') - 5);
      continue;
    }
    if (section.empty() || line.rfind("| `", 0) != 0) continue;
    const std::vector<std::string> row = cells(line);
    if (section == "task") {
      const auto task = quoted_words(row.size() > 0 ? row[0] : "");
      const auto key = quoted_words(row.size() > 1 ? row[1] : "");
      EXPECT_TRUE(task.size() == 1 && key.size() == 1)
          << "a [task] row is | `task` | `key` |: " << line;
      if (task.size() == 1 && key.size() == 1) out.task_options[task[0]].insert(key[0]);
    } else {
      for (const auto& key : quoted_words(row[0])) out.by_section[section].insert(key);
    }
  }
  return out;
}

// Every key the parser knows: what its one writer writes for a config with every optional key
// present (parse_run_config(to_toml(c)) == c is tested in run_config_toml_test.cpp).
std::map<std::string, std::set<std::string>> parser_keys() {
  RunConfig c = minimal_run_config();
  c.max_queued_groups = 8;
  c.verify_enabled = true;                // written only when set
  c.verify_peer = true;                   // as is this
  c.train.lora.rank = 8;                  // [trainer.lora] is written only with LoRA on
  c.train.lora.init_adapter = "adapter";  // and init_adapter only when set
  const toml::table written = toml::parse(to_toml(c));
  std::map<std::string, std::set<std::string>> out;
  for (const auto& [section, table] : written) {
    if (!table.is_table()) continue;
    for (const auto& [key, value] : *table.as_table()) {
      const std::string name(section.str());
      if (const toml::table* sub = value.as_table()) {  // [trainer.lora]: a section of its own
        for (const auto& [sub_key, v] : *sub)
          out[name + "." + std::string(key.str())].insert(std::string(sub_key.str()));
        continue;
      }
      out[name].insert(std::string(key.str()));
    }
  }
  return out;
}

TEST(RunConfigDocs, EveryKeyOfTheParserIsDocumentedAndNoOther) {
  const DocumentedKeys docs =
      documented_keys(stoa::testing::read_text_or_throw(source_dir() / "docs/run-config.md"));
  const auto known = parser_keys();
  for (const auto& [section, keys] : known) {
    for (const auto& key : keys) {
      EXPECT_TRUE(docs.by_section.count(section) && docs.by_section.at(section).count(key))
          << "[" << section << "] " << key << " is not in docs/run-config.md";
    }
  }
  for (const auto& [section, keys] : docs.by_section) {
    for (const auto& key : keys) {
      EXPECT_TRUE(known.count(section) && known.at(section).count(key))
          << "docs/run-config.md lists [" << section << "] " << key
          << ", which the parser does not know";
    }
  }
  EXPECT_GE(docs.by_section.size(), 6u) << "sections found: the page's headings changed?";
}

TEST(RunConfigDocs, EveryTaskOptionIsDocumented) {
  const DocumentedKeys docs =
      documented_keys(stoa::testing::read_text_or_throw(source_dir() / "docs/run-config.md"));
  const env::TaskRegistry& tasks = env::builtin_tasks();
  for (const auto& name : tasks.names()) {
    const auto& accepted = tasks.keys(name).accepted;
    EXPECT_FALSE(accepted.empty()) << "task '" << name << "' does not declare its options";
    for (const auto& key : accepted) {
      EXPECT_TRUE(docs.task_options.count(name) && docs.task_options.at(name).count(key))
          << "[task] option '" << key << "' of task '" << name << "' is not documented";
    }
  }
  for (const auto& [task, keys] : docs.task_options) {
    ASSERT_TRUE(tasks.contains(task)) << "docs/run-config.md documents unknown task " << task;
    for (const auto& key : keys) {
      const auto& accepted = tasks.keys(task).accepted;
      EXPECT_NE(std::find(accepted.begin(), accepted.end(), key), accepted.end())
          << "docs/run-config.md lists option '" << key << "' that task '" << task
          << "' does not accept";
    }
  }
}

// The ```toml blocks of a Markdown file.
std::vector<std::string> toml_blocks(const std::string& page) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = page.find("```toml\n", at)) != std::string::npos) {
    const size_t start = at + 8, end = page.find("```", start);
    if (end == std::string::npos) break;
    out.push_back(page.substr(start, end - start));
    at = end + 3;
  }
  return out;
}

TEST(RunConfigDocs, EveryExampleInTheDocsParses) {
  // A fragment (a quickstart's [hub] host, say) is read on top of the keys every file needs.
  const toml::table required = toml::parse(kMinimalRunToml);
  std::vector<fs::path> pages = {source_dir() / "README.md"};
  for (const auto& entry : fs::recursive_directory_iterator(source_dir() / "docs"))
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  int examples = 0;
  for (const auto& page : pages) {
    for (const std::string& block : toml_blocks(stoa::testing::read_text_or_throw(page))) {
      ++examples;
      toml::table merged = required;
      try {
        const toml::table example = toml::parse(block);
        for (const auto& [section, table] : example) {
          if (!table.is_table() || !merged[section].is_table()) {
            merged.insert_or_assign(section, table);
            continue;
          }
          for (const auto& [key, value] : *table.as_table())
            merged[section].as_table()->insert_or_assign(key, value);
        }
      } catch (const toml::parse_error& e) {
        ADD_FAILURE() << page << ": an example is not TOML: " << e.description() << "\n" << block;
        continue;
      }
      std::stringstream text;
      text << merged;
      try {
        parse_run_config(text.str(), page.string(), "/base");
      } catch (const std::exception& e) {
        ADD_FAILURE() << page << ": an example does not parse: " << e.what() << "\n" << block;
      }
    }
  }
  EXPECT_GE(examples, 2) << "run-config.md and quickstart-fleet.md have examples";
}

}  // namespace
}  // namespace stoa::run
