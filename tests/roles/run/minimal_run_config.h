// The least a run config must say (its model, data, task and join token), as TOML and as a
// RunConfig: the base the run-config tests add the keys they are about to.
#pragma once
#include "roles/run/run_config.h"

namespace stoa::run {

inline constexpr const char* kMinimalRunToml = R"(
[run]
model = "model"
data = "data"
task = "search"
[hub]
join_token = "t"
)";

inline RunConfig minimal_run_config() {
  RunConfig c;
  c.model_dir = "/m";
  c.data_dir = "/d";
  c.run_dir = "/r";
  c.task = "search";
  c.hub.join_token = "t";
  return c;
}

}  // namespace stoa::run
