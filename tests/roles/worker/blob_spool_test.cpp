// The worker's blob path against the real hub over HTTP: HubBlobSource downloads to its spool
// dir through a proxy that cuts the connection every 256 KiB, resuming with Range from today's
// hub (which answers 206 for a ranged GET), and the blob arrives whole having moved <= 1.1x its
// bytes; the heartbeat's progress is cleared after the download and discard removes the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "net/hub_client.h"
#include "net/link_proxy.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"
#include "roles/worker/weight_sync.h"

namespace stoa::hub::testing {
namespace {

namespace fs = std::filesystem;

class WorkerBlobSpool : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    open_hub();
    ServerOptions so;
    so.threads = 8;
    serve(so);
  }
};

TEST_F(WorkerBlobSpool, ABlobResumesThroughACuttingProxyFromTheRealHub) {
  std::vector<uint8_t> bytes(4 << 20);
  uint64_t x = 88172645463325252ull;
  for (auto& b : bytes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  const Hash128 h = store->put(bytes);
  net::LinkProxyOptions link;
  link.target_port = server->port();
  link.cut_after_bytes = 256 << 10;
  net::LinkProxy proxy(link);
  net::HttpClientOptions o;
  o.backoff_base = std::chrono::milliseconds(5);
  net::HubClient client(proxy.url(), o);
  client.join("join-secret", {});
  const uint64_t before = proxy.counters().bytes_to_client;
  worker::HubBlobSource source(client, (dir / "worker" / "blobs").string());
  const std::optional<std::string> path = source.blob_file(h.hex());
  ASSERT_TRUE(path);
  std::ifstream in(*path, std::ios::binary);
  const std::vector<uint8_t> got((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(got, bytes);
  EXPECT_GE(proxy.counters().cuts, 10u);
  const double moved = static_cast<double>(proxy.counters().bytes_to_client - before);
  EXPECT_LE(moved, 1.1 * static_cast<double>(bytes.size()));
  EXPECT_FALSE(source.download_progress());  // cleared once the download is over
  source.discard(h.hex());
  EXPECT_FALSE(fs::exists(*path));
}

}  // namespace
}  // namespace stoa::hub::testing
