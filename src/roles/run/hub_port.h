// The port a run's hub serves on, kept across restarts. With `[hub] port = 0` (the default) the
// first start takes any free port and records it in <run dir>/hub_port; every later start binds
// that one again, so the join strings workers and the trainer hold stay good — a hub that came
// back on another port would orphan them for good. A recorded port that something else holds is
// an error that says so, not a quiet move to a new port (which would orphan the fleet the same
// way). A port the config names is bound as it is and never recorded.
#pragma once
#include <string>

#include "roles/run/run_config.h"

namespace stoa::run {

struct HubPort {
  int port = 0;           // what to bind: the config's, the recorded one, or 0 (any free port)
  bool recorded = false;  // `port` came from <run dir>/hub_port
};

// <run dir>/hub_port.
std::string hub_port_path(const RunConfig& config);

// The port to bind for `config` (above). kBadFormat for a hub_port file that holds no port.
HubPort hub_port_to_bind(const RunConfig& config);

// After the bind: records `bound_port` when the config names no port and none was recorded.
// kIo when the file cannot be written (a restart would then lose the port).
void remember_hub_port(const RunConfig& config, int bound_port);

// The error for a recorded port that cannot be bound: the port, the file and the choices.
[[noreturn]] void fail_recorded_port_taken(const RunConfig& config, int port,
                                           const std::string& why);

}  // namespace stoa::run
