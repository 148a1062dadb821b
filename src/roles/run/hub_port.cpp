#include "roles/run/hub_port.h"

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>

#include "core/error.h"
#include "core/file_bytes.h"

namespace stoa::run {

std::string hub_port_path(const RunConfig& config) {
  return config.run_dir + "/hub_port";
}

HubPort hub_port_to_bind(const RunConfig& config) {
  if (config.server.port != 0) return {config.server.port, false};
  const std::string path = hub_port_path(config);
  if (!std::filesystem::exists(path)) return {0, false};  // the first start
  const std::vector<uint8_t> bytes = read_file(path);
  const std::string text(bytes.begin(), bytes.end());
  int port = 0;
  size_t used = 0;
  try {
    port = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  STOA_CHECK(used > 0 && port > 0 && port < 65536 &&
                 text.find_first_not_of(" \n", used) == std::string::npos,
             ErrorKind::kBadFormat, "hub: ", path,
             " should hold the port this run's hub took at its first start, not '", text,
             "'; delete it to take a new port (workers then need the new join string)");
  return {port, true};
}

void remember_hub_port(const RunConfig& config, int bound_port) {
  if (config.server.port != 0 || hub_port_to_bind(config).recorded) return;
  const std::string text = std::to_string(bound_port) + "\n";
  write_file_atomic(hub_port_path(config),
                    std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

void fail_recorded_port_taken(const RunConfig& config, int port, const std::string& why) {
  fail(ErrorKind::kIo, "hub: cannot bind port ", port, ", which this run's hub took at its first ",
       "start ([hub] port = 0) and recorded in ", hub_port_path(config),
       " so that its join strings survive restarts (", why,
       "). Free the port, or set [hub] port or delete that file to take another one — the "
       "workers and the trainer then need the new join string");
}

}  // namespace stoa::run
