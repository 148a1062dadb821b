// A run's log file: `stoa run`, `stoa hub` and `stoa train --config` write every log line to
// <run dir>/<role>.log as well as to stderr (core/log.h), appended across restarts, so the run
// directory holds the run's story whoever started it and wherever its stderr went.
#pragma once
#include <string>

#include "roles/run/run_config.h"

namespace stoa::run {

// <run dir>/<role>.log: `run` (hub + trainer), `hub` (the hub alone), `trainer` (dialing in).
std::string run_log_path(const RunConfig& config, const std::string& role);

// Opens it (core/log.h's log_also_to_file) and logs a first line naming the role and the config.
// kIo when the file cannot be opened.
void open_run_log(const RunConfig& config, const std::string& role, const std::string& source);

}  // namespace stoa::run
