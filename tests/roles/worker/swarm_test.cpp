// The swarm (net/swarm/swarm.h) against the real hub over HTTP on loopback: its torrents, its
// tracker and its web seed, and real libtorrent sessions as workers. Peers serve each other
// (a blob fetched with no web seed at all comes whole from a peer; the hub's web seed sends each
// piece twice and refuses it after, and a third worker still gets the blob); a peer that
// serves corrupt bytes is caught by the v2 piece hashes (nothing bad is handed out) and banned; a
// peer that leaves mid-transfer is replaced by another; a transfer goes on while the hub restarts,
// whose keys survive it; a swarm of one finishes from the hub's web seed; a fetch nobody can serve
// stalls and leaves nothing behind; a hub without a swarm is fetched from as before; the tracker
// refuses strangers; a worker pulling the web seed in a loop is refused by its fetch allowance and
// the copy it was refused goes back to the web seed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "net/hub_client.h"
#include "net/swarm/swarm.h"
#include "pulse/catalog.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"
#include "roles/worker/swarm_source.h"
#include "roles/worker/weight_sync.h"

namespace stoa::hub::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::vector<uint8_t> random_bytes(size_t n, uint64_t x) {
  std::vector<uint8_t> bytes(n);
  for (auto& b : bytes) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  return bytes;
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), {});
}

net::swarm::PeerSessionOptions on_loopback(int upload_kib_s = 0) {
  net::swarm::PeerSessionOptions o;
  o.listen = "127.0.0.1:0";
  o.one_host = true;
  o.nat_traversal = false;
  o.upload_kib_s = upload_kib_s;
  return o;
}

// A fetch on a thread of its own, so the test can act on the swarm while it runs.
class BackgroundFetch {
 public:
  BackgroundFetch(net::swarm::PeerSession& session, net::swarm::FetchRequest request)
      : session_(session), thread_([this, r = std::move(request)] {
          try {
            path_ = session_.fetch(r);
          } catch (const std::exception& e) {
            failure_ = e.what();
          }
        }) {}
  ~BackgroundFetch() {
    if (thread_.joinable()) thread_.join();
  }
  // Waits (up to 10 s) until this many bytes came from peers.
  void wait_for_bytes(uint64_t bytes) {
    for (int i = 0; i < 400 && session_.stats().from_peers_bytes < bytes; ++i)
      std::this_thread::sleep_for(25ms);
  }
  // Joins; the fetched file's path (a failure fails the test).
  std::string path() {
    thread_.join();
    EXPECT_EQ(failure_, "");
    return path_;
  }

 private:
  net::swarm::PeerSession& session_;
  std::string path_, failure_;
  std::thread thread_;
};

class Swarm : public SwarmHubFixture {
 protected:
  // A joined worker's client and its swarm URLs.
  struct Member {
    std::unique_ptr<net::HubClient> client;
    std::string announce, seed;
  };
  Member member() {
    Member m;
    m.client = std::make_unique<net::HubClient>(url);
    m.client->join("join-secret", {});
    const net::HttpResponse r = m.client->http().post_json("/v1/swarm/key", "{}", true);
    EXPECT_EQ(r.status, 200) << r.body;
    const auto j = nlohmann::json::parse(r.body);
    m.announce = url + j.at("announce").get<std::string>();
    m.seed = url + j.at("seed").get<std::string>();
    return m;
  }
  net::swarm::FetchRequest request(const Member& m, const Hash128& blob, const std::string& where,
                                   bool web_seed) {
    const net::HttpResponse t = m.client->http().get("/v1/swarm/torrents/" + blob.hex());
    EXPECT_EQ(t.status, 200) << t.body;
    net::swarm::FetchRequest r;
    r.torrent.assign(t.body.begin(), t.body.end());
    r.tracker_url = m.announce;
    if (web_seed) r.web_seed_url = m.seed + blob.hex();
    r.save_dir = (dir / where).string();
    r.stall_timeout = 60s;
    return r;
  }
};

TEST_F(Swarm, ASwarmOfOneFinishesFromTheHubsWebSeed) {
  const auto bytes = random_bytes((3 << 20) + 12345, 7);  // not whole pieces: a v2 tail pad
  const Hash128 h = store->put(bytes);
  Member a = member();
  net::swarm::PeerSession session(on_loopback());
  const std::string path = session.fetch(request(a, h, "a", true));
  EXPECT_EQ(read_all(path), bytes);
  // No peer was there: every byte came from the hub (which part of a download was the web
  // seed's is sampled, so only the total is exact).
  const net::swarm::SwarmStats s = session.stats();
  EXPECT_EQ(s.connected_peers, 0);
  EXPECT_GE(s.from_peers_bytes + s.from_hub_bytes, bytes.size());
  EXPECT_EQ(s.uploaded_bytes, 0u);
}

TEST_F(Swarm, APeerServesAWholeBlobWithoutTheHub) {
  const auto bytes = random_bytes((4 << 20) - 999, 11);
  const Hash128 h = store->put(bytes);
  Member a = member(), b = member();
  net::swarm::PeerSession seeder(on_loopback());
  const std::string seeded = seeder.fetch(request(a, h, "a", true));
  seeder.release(seeded);  // used: now served to others
  net::swarm::PeerSession leecher(on_loopback());
  const std::string got = leecher.fetch(request(b, h, "b", false));  // peers only
  EXPECT_EQ(read_all(got), bytes);
  EXPECT_GE(leecher.stats().from_peers_bytes, bytes.size());
  EXPECT_EQ(leecher.stats().from_hub_bytes, 0u);
  EXPECT_GE(seeder.stats().uploaded_bytes, bytes.size());
  EXPECT_EQ(seeder.stats().seeding, 1);
}

// A hub that waits a minute before it sends a piece a third time: a loaded machine (a sanitizer
// build under ctest -j) can take longer than the default 5 s between the second fetch and the
// check that the web seed refuses. Its byte budget is out of the way (3 blob sizes): here each
// piece's copies are the subject (the budget's own test is the tracker's).
class SwarmWithAPatientWebSeed : public Swarm {
 protected:
  void configure() override {
    config.swarm_reseed_after_s = 60;
    config.swarm_web_seed_budget = 3;
  }
};

TEST_F(SwarmWithAPatientWebSeed, EachPieceLeavesTheHubTwiceAndTheSwarmServesTheRest) {
  const auto bytes = random_bytes((2 << 20) + 777, 41);
  const Hash128 h = store->put(bytes);
  Member a = member(), b = member(), c = member();
  // Two workers fetch every piece from the hub, one after the other (the first is gone before
  // the second starts, so neither has a peer to take a piece from).
  {
    net::swarm::PeerSession first(on_loopback());
    first.fetch(request(a, h, "a", true));
  }
  net::swarm::PeerSession second(on_loopback());
  second.release(second.fetch(request(b, h, "b", true)));
  // Every piece has left the hub twice: the web seed refuses it now.
  net::HttpClient anonymous(url);
  EXPECT_EQ(anonymous.get(request(c, h, "c", true).web_seed_url.substr(url.size())).status, 503);
  // A third worker gets the blob all the same: from the second.
  net::swarm::PeerSession third(on_loopback());
  EXPECT_EQ(read_all(third.fetch(request(c, h, "c", true))), bytes);
  EXPECT_GE(third.stats().from_peers_bytes, bytes.size());
  // The hub's status says as much: two copies' bytes out of the web seed, and its refusals.
  const net::HttpResponse status = anonymous.get("/v1/status");
  ASSERT_EQ(status.status, 200) << status.body;
  const auto swarm = nlohmann::json::parse(status.body).at("swarm");
  EXPECT_GE(swarm.at("web_seed_bytes").get<uint64_t>(), 2 * bytes.size());
  EXPECT_LE(swarm.at("web_seed_bytes").get<uint64_t>(), 3 * bytes.size());
  EXPECT_GE(swarm.at("web_seed_refusals").get<uint64_t>(), 1u);
  EXPECT_EQ(swarm.at("torrents").get<int>(), 1);
}

// A hub that sends each worker a blob's size once (fetches_per_blob = 1) and each piece twice
// from its web seed, with no re-send for a minute.
class SwarmWithATightAllowance : public Swarm {
 protected:
  void configure() override {
    config.fetches_per_blob = 1;
    config.swarm_reseed_after_s = 60;
    config.swarm_web_seed_budget = 3;
  }
};

TEST_F(SwarmWithATightAllowance, AWorkerPullingTheWebSeedInALoopIsRefusedAndItsCopyGoesBack) {
  const auto bytes = random_bytes(3 << 20, 43);  // over the allowance's 1 MiB floor
  const Hash128 h = store->put(bytes);
  Member looping = member(), honest = member();
  ASSERT_EQ(looping.client->http().get("/v1/swarm/torrents/" + h.hex()).status, 200);
  net::HttpClientOptions once;  // a 429 is answered as it comes, not waited out
  once.max_attempts = 1;
  net::HttpClient raw(url, once);
  const std::string looping_seed = looping.seed.substr(url.size()) + h.hex();
  const net::HttpResponse first = raw.get(looping_seed);
  ASSERT_EQ(first.status, 200) << first.body.substr(0, 200);
  EXPECT_EQ(first.body.size(), bytes.size());
  // The second copy is the web seed's to give, but not this worker's to take.
  const net::HttpResponse again = raw.get(looping_seed);  // one try
  EXPECT_EQ(again.status, 429) << again.body.substr(0, 200);
  EXPECT_NE(again.body.find("fetches_per_blob"), std::string::npos) << again.body;
  // The refused copy went back to the web seed: another worker gets it (without the give-back
  // every piece would have left twice, and the web seed would answer 503 for a minute).
  const net::HttpResponse other = raw.get(honest.seed.substr(url.size()) + h.hex());
  ASSERT_EQ(other.status, 200) << other.body.substr(0, 200);
  EXPECT_EQ(std::vector<uint8_t>(other.body.begin(), other.body.end()), bytes);
  const auto status = nlohmann::json::parse(raw.get("/v1/status").body);
  EXPECT_EQ(status.at("fetch_allowance").at("refusals").get<int>(), 1);
  EXPECT_EQ(status.at("swarm").at("web_seed_cut_bytes").get<uint64_t>(), bytes.size());
  EXPECT_EQ(status.at("swarm").at("web_seed_bytes").get<uint64_t>(), 3 * bytes.size())
      << "the refused copy is counted as allowed, then as cut";
}

TEST_F(Swarm, APeerServingCorruptBytesIsCaughtAndBanned) {
  const auto bytes = random_bytes(4 << 20, 13);
  const Hash128 h = store->put(bytes);
  Member liar = member(), honest = member(), victim = member();
  // The liar on an address of its own: a ban is per address, and on one address it would
  // take the honest peer with it.
  net::swarm::PeerSessionOptions liar_address = on_loopback();
  liar_address.listen = "127.0.0.2:0";
  liar_address.outgoing_interface = "127.0.0.2";
  net::swarm::PeerSession bad(liar_address), good(on_loopback());
  const std::string bad_path = bad.fetch(request(liar, h, "liar", true));
  bad.release(bad_path);
  good.release(good.fetch(request(honest, h, "honest", true)));
  // The liar's copy rots on disk after it was verified: libtorrent serves it as it is.
  {
    std::fstream f(bad_path, std::ios::in | std::ios::out | std::ios::binary);
    const std::vector<char> junk(bytes.size(), 'X');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  net::swarm::PeerSession session(on_loopback());
  // The web seed too: the liar and the honest peer took every piece from the hub already and
  // still announce, so it refuses them for 20 s and the victim asks its peers; it also finishes
  // the fetch should the honest peer stop delivering after the liar's ban (seen once, peers
  // only: swarm.md).
  const std::string got = session.fetch(request(victim, h, "victim", true));
  EXPECT_EQ(read_all(got), bytes);  // nothing of the liar's made it in
  const net::swarm::SwarmStats s = session.stats();
  EXPECT_GE(s.hash_failures, 1) << "the liar was never asked for a piece";
  // The liar is banned; so, now and then, is the honest peer: a piece whose blocks came from
  // both fails its hash as a whole and libtorrent bans every peer that sent a block of it (seen
  // once in a loaded run: 2 bans). The web seed then finishes the fetch.
  EXPECT_GE(s.banned_peers, 1);
  EXPECT_LE(s.banned_peers, 2);
}

TEST_F(Swarm, APeerLeavingMidTransferIsReplaced) {
  const auto bytes = random_bytes(4 << 20, 17);
  const Hash128 h = store->put(bytes);
  Member first = member(), second = member(), downloader = member();
  auto leaver = std::make_unique<net::swarm::PeerSession>(on_loopback(512));  // 8 s for it all
  leaver->release(leaver->fetch(request(first, h, "first", true)));
  net::swarm::PeerSession session(on_loopback());
  BackgroundFetch fetching(session, request(downloader, h, "downloader", false));
  // Part of the blob has come from the capped peer: it leaves.
  fetching.wait_for_bytes(512u << 10);
  EXPECT_LT(session.stats().from_peers_bytes, bytes.size());
  leaver.reset();
  // Another peer holds it: the download goes on from there.
  net::swarm::PeerSession replacement(on_loopback());
  replacement.release(replacement.fetch(request(second, h, "second", true)));
  EXPECT_EQ(read_all(fetching.path()), bytes);
}

TEST_F(Swarm, TheSwarmGoesOnWhileTheHubRestarts) {
  const auto bytes = random_bytes(4 << 20, 37);
  const Hash128 h = store->put(bytes);
  Member a = member(), b = member(), c = member();
  net::swarm::PeerSession seeder(on_loopback(512));  // 8 s for the whole blob
  seeder.release(seeder.fetch(request(a, h, "a", true)));
  const net::swarm::FetchRequest later = request(c, h, "c", true);  // key and torrent from now
  net::swarm::PeerSession session(on_loopback());
  BackgroundFetch fetching(session, request(b, h, "b", false));
  fetching.wait_for_bytes(512u << 10);
  // The hub goes down mid-transfer: its tracker and web seed with it.
  const int port = server->port();
  server.reset();
  hub.reset();
  std::this_thread::sleep_for(500ms);
  EXPECT_LT(session.stats().from_peers_bytes, bytes.size());
  ServerOptions so;
  so.port = port;
  open_hub();
  serve(so);
  EXPECT_EQ(read_all(fetching.path()), bytes);
  // The restarted hub knows the keys it gave before: a worker's libtorrent keeps its URLs.
  net::HttpClient anonymous(url);
  EXPECT_EQ(anonymous.get(later.web_seed_url.substr(url.size())).status, 200);
  net::swarm::PeerSession third(on_loopback());
  EXPECT_EQ(read_all(third.fetch(later)), bytes);
}

TEST_F(Swarm, AFetchWithNoPeersAndNoWebSeedStallsAndLeavesNothing) {
  const auto bytes = random_bytes(1 << 20, 19);
  const Hash128 h = store->put(bytes);
  Member a = member();
  net::swarm::PeerSession session(on_loopback());
  net::swarm::FetchRequest r = request(a, h, "alone", false);  // nobody holds it
  r.stall_timeout = 1500ms;
  try {
    session.fetch(r);
    FAIL() << "a fetch from nobody finished";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNetwork) << e.what();
    EXPECT_NE(std::string(e.what()).find("no verified byte"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "alone" / h.hex()));
  EXPECT_EQ(session.stats().seeding, 0);
}

TEST_F(Swarm, AHubWithoutASwarmIsFetchedFromAsBefore) {
  server.reset();
  hub.reset();
  config.swarm = false;
  open_hub();
  serve();
  url = "http://127.0.0.1:" + std::to_string(server->port());
  const auto bytes = random_bytes(1 << 20, 31);
  const Hash128 h = store->put(bytes);
  net::HubClient client(url);
  client.join("join-secret", {});
  worker::HubBlobSource hub_source(client, (dir / "spool").string());
  worker::SwarmSourceOptions o;
  o.session = on_loopback();
  o.dir = (dir / "swarm").string();
  worker::SwarmBlobSource source(client, hub_source, o);
  const std::optional<std::string> path = source.blob_file(h.hex());
  ASSERT_TRUE(path);
  EXPECT_EQ(read_all(*path), bytes);
  EXPECT_EQ(fs::path(*path).parent_path(), dir / "spool");
  EXPECT_EQ(source.fallbacks(), 0u);  // not a failure: this hub has no swarm
}

TEST_F(Swarm, TheSourceSeedsWhatTheSyncUsedAndRefetchesFromTheHub) {
  const auto bytes = random_bytes(2 << 20, 23);
  const Hash128 h = store->put(bytes);
  Member a = member();
  worker::HubBlobSource hub_source(*a.client, (dir / "spool").string());
  worker::SwarmSourceOptions o;
  o.session = on_loopback();
  o.dir = (dir / "swarm").string();
  worker::SwarmBlobSource source(*a.client, hub_source, o);
  const std::optional<std::string> path = source.blob_file(h.hex());
  ASSERT_TRUE(path);
  EXPECT_EQ(fs::path(*path).parent_path(), dir / "swarm");
  EXPECT_EQ(read_all(*path), bytes);
  source.discard(h.hex());
  EXPECT_TRUE(fs::exists(*path));  // kept, and served
  EXPECT_EQ(source.stats().seeding, 1);
  // The sync asks again only for what it refused: that comes from the hub's own route.
  const std::optional<std::string> again = source.blob_file(h.hex());
  ASSERT_TRUE(again);
  EXPECT_EQ(fs::path(*again).parent_path(), dir / "spool");
}

// A blob the hub's route names as small (a patch) does not wait on the swarm: the hub's own
// route at once; a large one (an anchor) still goes through the swarm.
TEST_F(Swarm, ASmallBlobOfTheRouteComesStraightFromTheHub) {
  const auto small = random_bytes(64 << 10, 41);
  const auto large = random_bytes(2 << 20, 43);
  const Hash128 hs = store->put(small), hl = store->put(large);
  // Version 0 an anchor (large), version 1 a patch from it (small), as a publisher's catalog
  // names them (the hub routes workers by the store's catalog).
  const pulse::CatalogEntry anchor{pulse::BlobKind::kAnchor, 0, 0, hl, large.size()};
  const pulse::CatalogEntry patch{pulse::BlobKind::kPatch, 0, 1, hs, small.size()};
  pulse::Catalog catalog;
  catalog.add(anchor);
  catalog.add(patch);
  catalog.save(store->dir() + "/catalog.json");
  pulse::Published p;
  p.version = 0;
  p.anchor = anchor;
  hub->publish_version(p, Hash128{1, 1});
  p = pulse::Published();
  p.version = 1;
  p.patch = patch;
  hub->publish_version(p, Hash128{2, 2});
  Member a = member();
  worker::HubBlobSource hub_source(*a.client, (dir / "spool").string());
  worker::SwarmSourceOptions o;
  o.session = on_loopback();
  o.dir = (dir / "swarm").string();
  worker::SwarmBlobSource source(*a.client, hub_source, o);
  const net::VersionInfo route = source.version(std::nullopt, 1s);
  ASSERT_EQ(route.blobs.size(), 2u) << "anchor 0, then the patch 0 -> 1";
  EXPECT_EQ(route.blobs[1].hash, hs.hex());
  EXPECT_EQ(route.blobs[1].bytes, small.size());
  const std::optional<std::string> direct = source.blob_file(hs.hex());
  ASSERT_TRUE(direct);
  EXPECT_EQ(fs::path(*direct).parent_path(), dir / "spool") << "below 1 MiB: from the hub";
  EXPECT_EQ(read_all(*direct), small);
  const std::optional<std::string> swarmed = source.blob_file(hl.hex());
  ASSERT_TRUE(swarmed);
  EXPECT_EQ(fs::path(*swarmed).parent_path(), dir / "swarm") << "2 MiB: through the swarm";
  EXPECT_EQ(source.fallbacks(), 0u);
}

TEST_F(Swarm, TheTrackerRefusesUnknownKeysAndForeignTorrents) {
  const auto bytes = random_bytes(1 << 16, 29);
  const Hash128 h = store->put(bytes);
  Member a = member();
  net::HttpClient anonymous(url);
  const net::HttpResponse r =
      anonymous.get("/v1/swarm/nokey/announce?info_hash=%00%01&port=1&left=0");
  EXPECT_EQ(r.status, 200);  // trackers answer failures in bencode
  EXPECT_NE(r.body.find("failure reason"), std::string::npos);
  EXPECT_EQ(anonymous.get("/v1/swarm/torrents/" + h.hex()).status, 401);
  EXPECT_EQ(anonymous.get("/v1/swarm/nokey/blobs/" + h.hex()).status, 403);
  // A known key, a torrent this hub never made.
  const net::HttpResponse f = anonymous.get(
      a.announce.substr(url.size()) +
      "?info_hash=%11%22%33%44%55%66%77%88%99%aa%bb%cc%dd%ee%ff%00%01%02%03%04&port=7&left=0");
  EXPECT_NE(f.body.find("not a torrent of this hub"), std::string::npos) << f.body;
  EXPECT_EQ(a.client->http().get("/v1/swarm/torrents/" + std::string(32, '0')).status, 404);
  // A worker that serves nobody gets a key of its own kind; a key request that is not one is
  // refused.
  const net::HttpResponse fetch_only =
      a.client->http().post_json("/v1/swarm/key", R"({"serve": false})", true);
  ASSERT_EQ(fetch_only.status, 200) << fetch_only.body;
  EXPECT_NE(nlohmann::json::parse(fetch_only.body).at("announce"), a.announce.substr(url.size()));
  EXPECT_EQ(a.client->http().post_json("/v1/swarm/key", R"({"serve": "no"})", true).status, 400);
  EXPECT_EQ(a.client->http().post_json("/v1/swarm/key", "[1]", true).status, 400);
}

}  // namespace
}  // namespace stoa::hub::testing
