// SIGINT / SIGTERM end a run's process cleanly (after the current step); SIGPIPE is ignored, so a
// peer that hangs up mid-response (TLS writes can raise it) never kills a hub or a trainer.
#pragma once
#include <atomic>

namespace stoa::run {

// Installs the handlers (before anything slow: a supervisor's SIGTERM during start-up must also
// end in a clean exit) and returns the flag they set.
const std::atomic<bool>& stop_on_signals();

}  // namespace stoa::run
