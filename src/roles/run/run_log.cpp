#include "roles/run/run_log.h"

#include <unistd.h>

#include "core/log.h"

namespace stoa::run {

std::string run_log_path(const RunConfig& config, const std::string& role) {
  return config.run_dir + "/" + role + ".log";
}

void open_run_log(const RunConfig& config, const std::string& role, const std::string& source) {
  log_also_to_file(run_log_path(config, role));
  // Appended across restarts: the first line of each start says where one begins.
  log_info(role, "start: pid ", ::getpid(), ", config ", source, ", log ",
           run_log_path(config, role));
}

}  // namespace stoa::run
