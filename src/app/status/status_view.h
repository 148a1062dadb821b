// `stoa status`: the hub's /v1/status rendered as one terminal screen for operators on SSH — the
// run (version, trainer step, reward, DPPO masked fraction and TV, busy fraction), the intake
// counters, and the workers (tokens/s, patch lag, last seen). Worker names come from strangers, so
// every string taken from the hub is made printable first: a name cannot move the cursor, clear
// the screen or set the terminal's title.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace stoa::app {

struct StatusViewOptions {
  int max_workers = 20;  // rows of the worker table; the rest is summarised in one line
  int width = 100;       // columns; longer names are cut
};

// The screen for one /v1/status snapshot (no trailing escape codes; the caller clears the screen).
std::string render_status(const nlohmann::json& status, const StatusViewOptions& options = {});

// `text` with control characters (C0, DEL, C1, ESC sequences) replaced by '?', invalid UTF-8 bytes
// by '?', and cut to at most `max_chars` code points ("…" marks a cut).
std::string printable(const std::string& text, size_t max_chars);

}  // namespace stoa::app
