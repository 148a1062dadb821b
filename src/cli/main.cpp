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
  // By path; a command may also be the parent of others ("hub" and "hub token add").
  std::map<std::string, std::pair<CLI::App*, Action>> actions;
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
    CLI::App* command = nullptr;
    if (auto it = nodes.find(entry.path); it != nodes.end()) {
      // Registered first as the parent of another command: it runs itself when no subcommand
      // follows.
      command = it->second;
      command->description(entry.description);
      command->require_subcommand(0, 1);
    } else {
      command = parent->add_subcommand(parts.back(), entry.description);
      nodes[entry.path] = command;
    }
    actions[entry.path] = {command, entry.setup(*command)};
  }
  // A parent command registered after its children: they need it to accept no subcommand too.
  for (auto& [path, entry] : actions) {
    if (!entry.first->get_subcommands({}).empty()) entry.first->require_subcommand(0, 1);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // The deepest command parsed runs ("hub token add", not "hub").
  const std::pair<CLI::App*, Action>* chosen = nullptr;
  size_t depth = 0;
  for (auto& [path, entry] : actions) {
    const size_t d = split_path(path).size();
    if (entry.first->parsed() && entry.second && (!chosen || d > depth)) {
      chosen = &entry;
      depth = d;
    }
  }
  if (chosen) {
    try {
      return chosen->second();
    } catch (const stoa::Error& e) {
      std::fprintf(stderr, "stoa: %s: %s\n", stoa::error_kind_name(e.kind()), e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "stoa: error: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}

}  // namespace stoa::cli

int main(int argc, char** argv) {
  return stoa::cli::run_main(argc, argv);
}
