// The `stoa` command line: every subcommand lives in its own cmd_*.cpp file and registers itself
// with a static CommandRegistration, so adding a command never touches a shared list.
//
//   static stoa::cli::CommandRegistration reg("bench engine", "Engine speed beside llama.cpp",
//       [](CLI::App& app) {
//         auto opts = std::make_shared<Options>();
//         app.add_option("--model", opts->model, "...");
//         return [opts] { return run(*opts); };   // the action, run after parsing
//       });
//
// A path with spaces ("bench engine") nests under a parent command created on demand.
#pragma once
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace stoa::cli {

using Action = std::function<int()>;
using Setup = std::function<Action(CLI::App&)>;

struct CommandRegistration {
  CommandRegistration(std::string path, std::string description, Setup setup);
};

// Builds the app from every registration; used by main().
int run_main(int argc, char** argv);

}  // namespace stoa::cli
