// `stoa status --hub URL`: fetches the hub's /v1/status and shows it as one terminal screen,
// refreshed every few seconds (or once, for scripts and logs).
#pragma once
#include <atomic>
#include <cstdio>
#include <string>

#include "app/status/status_view.h"

namespace stoa::app {

struct StatusWatchOptions {
  std::string hub_url;         // http(s)://host:port
  std::string operator_token;  // sent as a bearer token when set (a hub off loopback asks for it)
  std::string ca_cert_path;    // HTTPS: the hub's certificate to trust
  std::string pin_sha256;      // HTTPS: the join string's pinned fingerprint (status_target.h)
  bool once = false;           // print one snapshot and return
  double interval_s = 2.0;
  StatusViewOptions view;
};

// Returns the exit status: 0, or 1 when `once` and the hub could not be read (message on stderr).
// Refreshing, a failed read shows the error on the screen and the next refresh tries again; it
// returns when `stop` is set.
int watch_status(const StatusWatchOptions& options, const std::atomic<bool>& stop,
                 std::FILE* out = stdout);

}  // namespace stoa::app
