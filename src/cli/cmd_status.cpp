// `stoa status --hub URL|JOIN_STRING` or `--run-dir DIR`: the run at a glance in a terminal
// (app/status/status_watch.h; which hub and how it is trusted: app/status/status_target.h).
#include <atomic>
#include <csignal>
#include <memory>

#include "app/status/status_target.h"
#include "app/status/status_watch.h"
#include "cli/command.h"

namespace stoa::cli {
namespace {

std::atomic<bool> g_stop{false};
void stop_on_signal(int) {
  g_stop = true;
}

CommandRegistration reg(
    "status", "The hub's run and workers on one terminal screen, refreshed (or --once)",
    [](CLI::App& app) {
      auto o = std::make_shared<app::StatusWatchOptions>();
      auto hub = std::make_shared<std::string>();
      auto run_dir = std::make_shared<std::string>();
      app.add_option("--hub", *hub,
                     "hub URL, http(s)://host:port, or a join string (its pin and token used)");
      app.add_option("--run-dir", *run_dir,
                     "the run directory on the hub's machine (hub.json, operator_token)");
      app.add_option("--token", o->operator_token,
                     "operator token (a hub that is not on loopback asks for one)");
      app.add_option("--ca-cert", o->ca_cert_path, "HTTPS: the hub's certificate to trust");
      app.add_flag("--once", o->once, "print one snapshot and exit");
      app.add_option("--interval", o->interval_s, "seconds between refreshes")
          ->capture_default_str();
      app.add_option("--workers", o->view.max_workers, "worker rows shown")->capture_default_str();
      return [o, hub, run_dir] {
        const app::StatusTarget t =
            app::resolve_status_target(*hub, *run_dir, o->operator_token, o->ca_cert_path);
        o->hub_url = t.hub_url;
        o->operator_token = t.operator_token;
        o->ca_cert_path = t.ca_cert_path;
        o->pin_sha256 = t.pin_sha256;
        std::signal(SIGINT, stop_on_signal);
        std::signal(SIGTERM, stop_on_signal);
        return app::watch_status(*o, g_stop);
      };
    });

}  // namespace
}  // namespace stoa::cli
