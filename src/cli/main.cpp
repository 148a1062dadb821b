#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "cli/command.h"
#include "core/error.h"

namespace stoa::cli {
namespace {

struct Entry {
  std::string path;
  std::string description;
  Setup setup;
};

std::vector<Entry>& registry() {
  static std::vector<Entry> entries;
  return entries;
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::istringstream in(path);
  for (std::string word; in >> word;) parts.push_back(word);
  return parts;
}

}  // namespace

CommandRegistration::CommandRegistration(std::string path, std::string description, Setup setup) {
  registry().push_back({std::move(path), std::move(description), std::move(setup)});
}

int run_main(int argc, char** argv) {
  CLI::App app{"stoa: RL post-training with int8 rollouts from consumer machines"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stoa 0.1.0");
  std::map<std::string, CLI::App*> nodes;  // path prefix -> app node
  std::map<CLI::App*, Action> actions;
  for (auto& entry : registry()) {
    std::vector<std::string> parts = split_path(entry.path);
    CLI::App* parent = &app;
    std::string prefix;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      prefix += (prefix.empty() ? "" : " ") + parts[i];
      auto it = nodes.find(prefix);
      if (it == nodes.end()) {
        CLI::App* node = parent->add_subcommand(parts[i], parts[i] + " commands");
        node->require_subcommand(1);
        it = nodes.emplace(prefix, node).first;
      }
      parent = it->second;
    }
    CLI::App* command = parent->add_subcommand(parts.back(), entry.description);
    nodes[entry.path] = command;
    actions[command] = entry.setup(*command);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [command, action] : actions) {
    if (command->parsed() && action) {
      try {
        return action();
      } catch (const stoa::Error& e) {
        std::fprintf(stderr, "stoa: %s: %s\n", stoa::error_kind_name(e.kind()), e.what());
        return 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "stoa: error: %s\n", e.what());
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace stoa::cli

int main(int argc, char** argv) {
  return stoa::cli::run_main(argc, argv);
}
