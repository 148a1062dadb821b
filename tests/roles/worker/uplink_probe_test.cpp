// The upload-rate probe (roles/worker/uplink_probe.h) against the real hub over HTTP: through a
// link of a known rate (the fleet bench's delaying proxy, 512 KiB/s up, 10 ms each way) it
// measures that rate; a body over the hub's bound is refused (413); a hub without a swarm has
// no probe (a clear kUnsupported, so the worker falls back to a fixed cap); the cap is the share
// asked for, never under 16 KiB/s.
#include <gtest/gtest.h>

#include "net/hub_client.h"
#include "net/link_proxy.h"
#include "roles/hub/hub_fixture.h"
#include "roles/worker/uplink_probe.h"

namespace stoa::hub::testing {
namespace {

using namespace std::chrono_literals;

using UplinkProbe = SwarmHubFixture;

TEST_F(UplinkProbe, MeasuresTheRateOfASlowLink) {
  net::LinkProxyOptions link;
  link.target_port = server->port();
  link.rate_bytes_per_s = 512 * 1024;
  link.one_way_delay = 10ms;
  net::LinkProxy proxy(link);
  net::HubClient client(proxy.url());
  client.join("join-secret", {});
  const worker::UplinkMeasure m = worker::measure_uplink(client.http());
  // 1 MiB is the first body to take a second at this rate.
  EXPECT_EQ(m.bytes, 1u << 20);
  EXPECT_GT(m.kib_s, 0.8 * 512) << m.seconds << " s";
  EXPECT_LT(m.kib_s, 1.2 * 512) << m.seconds << " s";
  EXPECT_GT(m.round_trip_s, 0.02);  // two 10 ms ways
  EXPECT_EQ(worker::upload_cap_kib_s(m, 0.5), static_cast<int>(m.kib_s * 0.5));
}

TEST_F(UplinkProbe, AFastLinkEndsWithTheLargestBody) {
  net::HubClient client(url);
  client.join("join-secret", {});
  const worker::UplinkMeasure m = worker::measure_uplink(client.http());
  EXPECT_GE(m.bytes, 4u << 20);  // loopback moves 4 MiB in well under a second
  EXPECT_GT(m.kib_s, 10 * 1024.0);
}

TEST_F(UplinkProbe, TheHubRefusesAnOversizedBodyAndStrangers) {
  net::HubClient client(url);
  client.join("join-secret", {});
  const std::string big = "\"" + std::string((8u << 20) + 1, 'x') + "\"";
  EXPECT_EQ(client.http().post_json("/v1/swarm/uplink", big, false).status, 413);
  net::HttpClient stranger(url);
  EXPECT_EQ(stranger.post_json("/v1/swarm/uplink", "\"x\"", false).status, 401);
}

TEST_F(UplinkProbe, TheCapIsTheShareAndNeverUnder16KiBs) {
  worker::UplinkMeasure m;
  m.kib_s = 1000;
  EXPECT_EQ(worker::upload_cap_kib_s(m, 0.5), 500);
  EXPECT_EQ(worker::upload_cap_kib_s(m, 1.0), 1000);
  m.kib_s = 10;
  EXPECT_EQ(worker::upload_cap_kib_s(m, 0.5), 16);
}

class UplinkProbeWithoutASwarm : public UplinkProbe {
 protected:
  void configure() override { config.swarm = false; }
};

TEST_F(UplinkProbeWithoutASwarm, SaysTheHubHasNoProbe) {
  net::HubClient client(url);
  client.join("join-secret", {});
  try {
    worker::measure_uplink(client.http());
    FAIL() << "measured against a hub without a swarm";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
  }
}

}  // namespace
}  // namespace stoa::hub::testing
