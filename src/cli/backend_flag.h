// `--backend auto|cpu|vulkan` (gpu/engine_backend_choice.h): what computes a command's passes —
// `stoa work`'s rollouts, `stoa validate`'s replays. One definition, so the commands offer the
// same choices and default.
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace stoa::cli {

// Adds the option to `app`; the value is read with gpu::parse_backend_choice when the command
// runs. `computes` names what the backend computes ("the rollouts", "the replays").
inline std::shared_ptr<std::string> add_backend_flag(CLI::App& app, const std::string& computes) {
  auto backend = std::make_shared<std::string>("cpu");
  app.add_option("--backend", *backend,
                 "what computes " + computes +
                     ": cpu, vulkan (a GPU through Vulkan, after a self-test against the CPU "
                     "engine's bits) or auto (such a GPU when one passes, else the CPU)")
      ->check(CLI::IsMember({"auto", "cpu", "vulkan"}))
      ->capture_default_str();
  return backend;
}

}  // namespace stoa::cli
