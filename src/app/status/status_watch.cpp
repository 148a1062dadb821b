#include "app/status/status_watch.h"

#include <chrono>
#include <thread>

#include "core/error.h"
#include "net/http_client.h"

namespace stoa::app {

namespace {

nlohmann::json fetch_status(net::HttpClient& client) {
  const net::HttpResponse response = client.get("/v1/status");
  net::check_ok(response, "GET /v1/status");
  auto status = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (!status.is_object())
    fail(ErrorKind::kNetwork, "GET /v1/status: the hub's answer is not a JSON object");
  return status;
}

}  // namespace

int watch_status(const StatusWatchOptions& options, const std::atomic<bool>& stop, std::FILE* out) {
  net::HttpClientOptions http;
  http.ca_cert_path = options.ca_cert_path;
  http.pin_sha256 = options.pin_sha256;
  http.max_attempts = options.once ? 3 : 1;  // refreshing retries by itself at the next tick
  net::HttpClient client(options.hub_url, http);
  if (!options.operator_token.empty()) client.set_bearer_token(options.operator_token);

  if (options.once) {
    try {
      std::fputs(render_status(fetch_status(client), options.view).c_str(), out);
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "stoa status: %s\n", e.what());
      return 1;
    }
  }
  const auto interval = std::chrono::duration<double>(std::max(0.2, options.interval_s));
  while (!stop) {
    std::string screen;
    try {
      screen = render_status(fetch_status(client), options.view);
    } catch (const std::exception& e) {
      screen = "stoa status: " + printable(e.what(), 200) + "\n(retrying every " +
               std::to_string(static_cast<int>(interval.count())) + " s)\n";
    }
    // Home + clear, then the screen: one write, so a slow terminal never shows half of each.
    std::fputs(("\033[H\033[2J" + screen + options.hub_url + " — Ctrl-C to quit\n").c_str(), out);
    std::fflush(out);
    const auto until = std::chrono::steady_clock::now() + interval;
    while (!stop && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}

}  // namespace stoa::app
