// How fast this machine can upload, measured against the hub (POST /v1/swarm/uplink), so the
// swarm's default upload cap can be a share of it (docs/design/swarm.md, "Volunteer-friendly").
// A home link's uplink is what a volunteer has least of; a fixed cap is either too much for a
// slow DSL line or a waste on fibre.
//
// The probe posts bodies of growing size (64 KiB, 256 KiB, 1 MiB, 4 MiB, 8 MiB) until one takes
// at least `min_probe_time` or the largest was sent; the rate is that body's bytes over its time
// less the time an empty post takes (the round trip and the hub's handling). It lasts a few
// seconds on any link (each body at most four times the one before, which took under the
// minimum) and moves at most ~13.3 MiB.
#pragma once
#include <chrono>
#include <optional>

namespace stoa::net {
class HttpClient;
}

namespace stoa::worker {

struct UplinkProbeOptions {
  std::chrono::milliseconds min_probe_time{1000};
  size_t max_body_bytes = 8u << 20;  // the hub refuses more (413)
};

struct UplinkMeasure {
  double kib_s = 0;         // the measured upload rate
  size_t bytes = 0;         // the body it was measured with
  double seconds = 0;       // that body's time, less the empty post's
  double round_trip_s = 0;  // the empty post's time
};

// Throws stoa::Error (kNetwork: the hub unreachable; kUnsupported: a hub without the route).
UplinkMeasure measure_uplink(net::HttpClient& http, const UplinkProbeOptions& options = {});

// The upload cap a volunteer gets by default: `share` of the measured rate, at least 16 KiB/s
// (a slower link still serves a little; libtorrent's uTP yields to the volunteer's own traffic).
int upload_cap_kib_s(const UplinkMeasure& measure, double share);

}  // namespace stoa::worker
