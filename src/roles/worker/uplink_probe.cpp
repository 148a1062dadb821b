#include "roles/worker/uplink_probe.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "net/http_client.h"

namespace stoa::worker {

namespace {

using Clock = std::chrono::steady_clock;

// A JSON string of `bytes` characters in all, quotes included: the hub reads and drops it.
std::string probe_body(size_t bytes) {
  std::string body(std::max<size_t>(bytes, 2), 'x');
  body.front() = '"';
  body.back() = '"';
  return body;
}

double timed_post(net::HttpClient& http, const std::string& body) {
  const auto start = Clock::now();
  const net::HttpResponse r = http.post_json("/v1/swarm/uplink", body, false);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (r.status == 404)
    throw Error(ErrorKind::kUnsupported, "the hub has no uplink probe (/v1/swarm/uplink)");
  if (r.status != 200)
    throw Error(ErrorKind::kNetwork, "uplink probe: the hub answered " + std::to_string(r.status) +
                                         ": " + r.body.substr(0, 200));
  return seconds;
}

}  // namespace

UplinkMeasure measure_uplink(net::HttpClient& http, const UplinkProbeOptions& options) {
  UplinkMeasure m;
  m.round_trip_s = timed_post(http, probe_body(2));
  const double min_s = std::chrono::duration<double>(options.min_probe_time).count();
  for (size_t bytes = 64u << 10;; bytes = std::min(bytes * 4, options.max_body_bytes)) {
    const double seconds = timed_post(http, probe_body(bytes));
    m.bytes = bytes;
    // A body that took no longer than the empty post measured nothing but noise: 1 ms stands
    // in (a link that fast is capped by the share of a large number, as it should be).
    m.seconds = std::max(seconds - m.round_trip_s, 1e-3);
    if (seconds >= min_s || bytes >= options.max_body_bytes) break;
  }
  m.kib_s = static_cast<double>(m.bytes) / 1024.0 / m.seconds;
  return m;
}

int upload_cap_kib_s(const UplinkMeasure& measure, double share) {
  const double cap = std::floor(measure.kib_s * share);
  return static_cast<int>(std::clamp(cap, 16.0, 1e9));
}

}  // namespace stoa::worker
