// The run processes' signal handling (stop_signals.h).
#include "roles/run/stop_signals.h"

#include <csignal>

namespace stoa::run {
namespace {

std::atomic<bool> g_stop{false};
void stop_run_on_signal(int) {
  g_stop.store(true);
}

}  // namespace

const std::atomic<bool>& stop_on_signals() {
  std::signal(SIGINT, stop_run_on_signal);
  std::signal(SIGTERM, stop_run_on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  return g_stop;
}

}  // namespace stoa::run
