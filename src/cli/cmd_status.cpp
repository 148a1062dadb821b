// `stoa status --hub URL`: the run at a glance in a terminal (app/status/status_watch.h).
#include <atomic>
#include <csignal>
#include <memory>

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
      app.add_option("--hub", o->hub_url, "hub URL, http(s)://host:port")->required();
      app.add_option("--token", o->operator_token,
                     "operator token (a hub that is not on loopback asks for one)");
      app.add_option("--ca-cert", o->ca_cert_path, "HTTPS: the hub's certificate to trust");
      app.add_flag("--once", o->once, "print one snapshot and exit");
      app.add_option("--interval", o->interval_s, "seconds between refreshes")
          ->capture_default_str();
      app.add_option("--workers", o->view.max_workers, "worker rows shown")->capture_default_str();
      return [o] {
        std::signal(SIGINT, stop_on_signal);
        std::signal(SIGTERM, stop_on_signal);
        return app::watch_status(*o, g_stop);
      };
    });

}  // namespace
}  // namespace stoa::cli
