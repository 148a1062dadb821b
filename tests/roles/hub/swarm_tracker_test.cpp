// The hub's swarm tracker without HTTP: keys that name their worker and survive a restart, the
// compact peer lists it hands out (never the announcer itself, "stopped" leaves the list, a
// refused worker gets a failure), torrents only for blobs in the store, and the web seed's share
// (each piece at most `copies` times, counted per piece of the asked range, again after the
// reseed window; its bytes counted), and the uplink probe's per-worker bucket.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <thread>

#include "net/protocol.h"
#include "net/swarm/swarm.h"
#include "pulse/blob_store.h"
#include "roles/hub/swarm/swarm_tracker.h"

namespace stoa::hub {
namespace {

namespace fs = std::filesystem;

class SwarmTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!net::swarm::available()) GTEST_SKIP() << "this build has no swarm engine";
    dir = fs::temp_directory_path() / ("stoa_swarm_tracker_" + net::random_token().substr(0, 10));
    store = std::make_unique<pulse::BlobStore>((dir / "blobs").string());
    std::vector<uint8_t> bytes(300'000);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + i / 991);
    blob = store->put(bytes);
    blob_size = bytes.size();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // The piece size of the blob's torrent (making the torrent, as the first fetch of it does).
  uint64_t piece_bytes(SwarmTracker& tracker) {
    return static_cast<uint64_t>(net::swarm::parse_torrent(tracker.torrent(blob)).piece_bytes);
  }
  // How many pieces of `piece` bytes the blob is (the budget tests want a few).
  uint64_t piece_count(uint64_t piece) const {
    const uint64_t pieces = (blob_size + piece - 1) / piece;
    EXPECT_GT(pieces, 3u);
    return pieces;
  }
  // The raw 20-byte announce hashes of the blob's torrent.
  std::vector<std::string> announce_hashes(SwarmTracker& tracker) {
    const net::swarm::Torrent t = net::swarm::parse_torrent(tracker.torrent(blob));
    std::vector<std::string> raw;
    for (const std::string& hex : t.announce_hashes) {
      std::string bytes;
      for (size_t i = 0; i < hex.size(); i += 2)
        bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
      raw.push_back(bytes);
    }
    return raw;
  }
  SwarmAnnounce announce(const std::string& info_hash, const std::string& ip, uint16_t port) {
    SwarmAnnounce a;
    a.info_hash = info_hash;
    a.ip = ip;
    a.port = port;
    a.left = 100;
    return a;
  }

  fs::path dir;
  std::unique_ptr<pulse::BlobStore> store;
  Hash128 blob;
  uint64_t blob_size = 0;
};

TEST_F(SwarmTrackerTest, KeysNameTheirWorkerAndSurviveARestart) {
  std::string key;
  {
    SwarmTracker tracker(*store, {});
    key = tracker.key_for("w-abc");
    EXPECT_EQ(tracker.key_for("w-abc"), key);
    EXPECT_NE(tracker.key_for("w-abd"), key);
    ASSERT_TRUE(tracker.holder_of(key));
    EXPECT_EQ(tracker.holder_of(key)->worker, "w-abc");
    EXPECT_TRUE(tracker.holder_of(key)->serves);
    // The MAC's last digit changed (to another digit whatever it was).
    const std::string tampered = key.substr(0, key.size() - 1) + (key.back() == '0' ? "1" : "0");
    EXPECT_FALSE(tracker.holder_of(tampered));
    EXPECT_FALSE(tracker.holder_of("w-abd" + key.substr(5)));  // another worker, the same MAC
    EXPECT_FALSE(tracker.holder_of("nodash"));
    EXPECT_FALSE(tracker.holder_of("w-abc-"));
    // A fetch-only key names the same worker, and neither kind can be made from the other.
    const std::string fetch_only = tracker.key_for("w-abc", false);
    ASSERT_TRUE(tracker.holder_of(fetch_only));
    EXPECT_EQ(tracker.holder_of(fetch_only)->worker, "w-abc");
    EXPECT_FALSE(tracker.holder_of(fetch_only)->serves);
    EXPECT_FALSE(tracker.holder_of("w-abc-n" + key.substr(6)));
    EXPECT_FALSE(tracker.holder_of("w-abc-" + fetch_only.substr(7)));
  }
  SwarmTracker restarted(*store, {});
  ASSERT_TRUE(restarted.holder_of(key));
  EXPECT_EQ(restarted.holder_of(key)->worker, "w-abc");
  SwarmTracker refusing(*store, [](const std::string& w) { return w != "w-abc"; });
  EXPECT_FALSE(refusing.holder_of(key));
  EXPECT_NE(refusing.announce(key, announce("x", "10.0.0.1", 1)).find("failure reason"),
            std::string::npos);
}

TEST_F(SwarmTrackerTest, PeersAreTheOthersAndStoppedOnesLeave) {
  SwarmTracker tracker(*store, {});
  const std::vector<std::string> hashes = announce_hashes(tracker);
  ASSERT_EQ(hashes.size(), 2u);  // v1 and v2
  const std::string a = tracker.key_for("w-a"), b = tracker.key_for("w-b");
  // The first announcer hears of nobody; the second of the first, whichever hash it uses.
  const std::string first = tracker.announce(a, announce(hashes[0], "10.0.0.1", 6881));
  EXPECT_NE(first.find("5:peers0:"), std::string::npos) << first;
  const std::string second = tracker.announce(b, announce(hashes[1], "10.0.0.2", 6881));
  const std::string compact_a = std::string("\x0a\x00\x00\x01\x1a\xe1", 6);
  EXPECT_NE(second.find("5:peers6:" + compact_a), std::string::npos) << second;
  EXPECT_EQ(tracker.stats().peers, 2u);
  SwarmAnnounce stop = announce(hashes[0], "10.0.0.1", 6881);
  stop.event = "stopped";
  tracker.announce(a, stop);
  EXPECT_EQ(tracker.stats().peers, 1u);
  EXPECT_NE(tracker.announce(b, announce(std::string(20, 'z'), "10.0.0.2", 6881))
                .find("not a torrent of this hub"),
            std::string::npos);
  EXPECT_NE(tracker.announce(b, announce(hashes[0], "10.0.0.2", 0)).find("port 0"),
            std::string::npos);
}

TEST_F(SwarmTrackerTest, AWorkerThatServesNobodyIsNoPeerAndHoldsNothing) {
  // `stoa work --no-serve`: listed to nobody (a connection to it would answer nothing), given
  // the others, and a piece it took from the web seed waits one window, as if nobody held it.
  SwarmTracker tracker(
      *store, {},
      SwarmTrackerOptions{.web_seed_copies = 1, .reseed_after = std::chrono::seconds(1)});
  const uint64_t piece = piece_bytes(tracker);
  const std::string hash = announce_hashes(tracker)[0];
  const std::string leech = tracker.key_for("w-leech", false), seed = tracker.key_for("w-seed");
  EXPECT_NE(tracker.announce(leech, announce(hash, "10.0.0.1", 6881)).find("5:peers0:"),
            std::string::npos);
  const std::string to_seed = tracker.announce(seed, announce(hash, "10.0.0.2", 6881));
  EXPECT_NE(to_seed.find("5:peers0:"), std::string::npos) << to_seed;
  const std::string to_leech = tracker.announce(leech, announce(hash, "10.0.0.1", 6881));
  EXPECT_NE(to_leech.find("5:peers6:" + std::string("\x0a\x00\x00\x02\x1a\xe1", 6)),
            std::string::npos)
      << to_leech;
  EXPECT_EQ(tracker.stats().peers, 2u);
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece, "w-leech"));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, piece, piece, "w-seed"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece, "w-other"));       // nobody serves it
  EXPECT_FALSE(tracker.web_seed_allowed(blob, piece, piece, "w-other"));  // w-seed may pass it on
}

TEST_F(SwarmTrackerTest, TorrentsOnlyForBlobsInTheStoreAndKeptAcrossARestart) {
  {
    SwarmTracker tracker(*store, {});
    EXPECT_THROW(tracker.torrent(Hash128{1, 2}), Error);
    const net::swarm::Torrent t = net::swarm::parse_torrent(tracker.torrent(blob));
    EXPECT_EQ(t.size, blob_size);
    EXPECT_EQ(tracker.stats().torrents_made, 1u);
  }
  EXPECT_TRUE(fs::exists(dir / "blobs" / "torrents" / (blob.hex() + ".torrent")));
  SwarmTracker restarted(*store, {});
  const std::vector<std::string> hashes = announce_hashes(restarted);
  EXPECT_EQ(restarted.stats().torrents_made, 0u);  // read back from disk, not hashed again
  const std::string reply =
      restarted.announce(restarted.key_for("w-a"), announce(hashes[0], "10.0.0.1", 6881));
  EXPECT_EQ(reply.find("failure reason"), std::string::npos) << reply;
}

TEST_F(SwarmTrackerTest, TheWebSeedSendsEachPieceAtMostCopiesTimes) {
  SwarmTracker tracker(*store, {}, SwarmTrackerOptions{.web_seed_copies = 2});
  const uint64_t piece = piece_bytes(tracker);
  ASSERT_GT(blob_size, 3 * piece);
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece));
  EXPECT_FALSE(tracker.web_seed_allowed(blob, 0, piece));      // sent twice
  EXPECT_FALSE(tracker.web_seed_allowed(blob, 0, 2 * piece));  // one of its pieces is
  EXPECT_TRUE(tracker.web_seed_allowed(blob, piece, piece));   // another piece
  EXPECT_TRUE(tracker.web_seed_allowed(blob, piece + 10, 5));  // inside that piece: its 2nd
  EXPECT_FALSE(tracker.web_seed_allowed(blob, piece, 1));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 2 * piece, blob_size - 2 * piece));  // to the end
  EXPECT_EQ(tracker.stats().web_seed_refusals, 3u);
  // What it let through, counted as the hub's bytes out: 2 + 1 + 1 + the tail.
  EXPECT_EQ(tracker.stats().web_seed_ranges, 5u);
  EXPECT_EQ(tracker.stats().web_seed_bytes, 3 * piece + 5 + (blob_size - 2 * piece));
}

TEST_F(SwarmTrackerTest, APieceNobodyGotForTheReseedWindowLeavesTheHubAgain) {
  SwarmTracker tracker(
      *store, {},
      SwarmTrackerOptions{.web_seed_copies = 1, .reseed_after = std::chrono::seconds(1)});
  const uint64_t piece = piece_bytes(tracker);
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece));
  EXPECT_FALSE(tracker.web_seed_allowed(blob, 0, piece));  // its one copy left a moment ago
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece));  // its holders never served it
  EXPECT_FALSE(tracker.web_seed_allowed(blob, 0, piece));
  EXPECT_EQ(tracker.stats().web_seed_resent_bytes, piece);  // counted as sent again
  EXPECT_EQ(tracker.stats().web_seed_bytes, 2 * piece);
}

TEST_F(SwarmTrackerTest, EachTimeAPieceGoesAgainTheNextWaitDoubles) {
  // Its holders are there but slow to pass it on: the hub must not feed the whole swarm every
  // window. One second, then two, then four.
  SwarmTracker tracker(
      *store, {},
      SwarmTrackerOptions{.web_seed_copies = 1, .reseed_after = std::chrono::seconds(1)});
  const uint64_t piece = piece_bytes(tracker);
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece));  // stuck once: again after 1 s
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_FALSE(tracker.web_seed_allowed(blob, 0, piece));     // now it waits 2 s
  EXPECT_TRUE(tracker.web_seed_allowed(blob, piece, piece));  // another piece is not held back
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece));
  EXPECT_EQ(tracker.stats().web_seed_resent_bytes, 2 * piece);
  // A copy sent again that did not arrive is taken back with its doubling: 2 s, not 4 s.
  tracker.web_seed_cut(blob, 0, piece, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_FALSE(tracker.web_seed_allowed(blob, 0, piece));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece));
}

TEST_F(SwarmTrackerTest, APieceWhoseTakerIsStillInTheSwarmWaitsLongerToGoAgain) {
  // The worker that took the one copy is still announcing: the piece is being passed on, only
  // slowly, so the hub waits kReseedWaitWhileHeld windows; once it left, one window.
  SwarmTracker tracker(
      *store, {},
      SwarmTrackerOptions{.web_seed_copies = 1, .reseed_after = std::chrono::seconds(1)});
  static_assert(SwarmTracker::kReseedWaitWhileHeld == 4);
  const uint64_t piece = piece_bytes(tracker);
  const std::string hash = announce_hashes(tracker)[0];
  const std::string taker = tracker.key_for("w-taker");
  tracker.announce(taker, announce(hash, "10.0.0.1", 6881));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece, "w-taker"));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, piece, piece, "w-gone"));  // never announced
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_FALSE(tracker.web_seed_allowed(blob, 0, piece, "w-other"));     // its taker is there
  EXPECT_TRUE(tracker.web_seed_allowed(blob, piece, piece, "w-other"));  // its taker is not
  SwarmAnnounce stop = announce(hash, "10.0.0.1", 6881);
  stop.event = "stopped";
  tracker.announce(taker, stop);
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece, "w-other"));  // it left: stuck
  EXPECT_EQ(tracker.stats().web_seed_resent_bytes, 2 * piece);
  // A copy that did not arrive names no holder: "w-third" announces, but its copy of piece 2
  // (sent again: its first taker never announced) was cut before a byte.
  tracker.announce(tracker.key_for("w-third"), announce(hash, "10.0.0.3", 6881));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 2 * piece, piece, "w-gone"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 2 * piece, piece, "w-third"));
  tracker.web_seed_cut(blob, 2 * piece, piece, 0, "w-third");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 2 * piece, piece, "w-fourth"));
}

TEST_F(SwarmTrackerTest, TheTakersABlobRemembersAreBounded) {
  // Past kMaxPeers distinct takers a worker goes unnamed: its pieces wait as if it had left.
  SwarmTracker tracker(
      *store, {},
      SwarmTrackerOptions{
          .web_seed_copies = 255, .web_seed_budget = 1e9, .reseed_after = std::chrono::seconds(1)});
  const uint64_t piece = piece_bytes(tracker);
  const uint64_t pieces = piece_count(piece);
  for (size_t i = 0; i < SwarmTracker::kMaxPeers; ++i)
    ASSERT_TRUE(tracker.web_seed_allowed(blob, (i % (pieces - 1)) * piece, piece,
                                         "w-" + std::to_string(i)));
  const uint64_t last = (pieces - 1) * piece;
  tracker.announce(tracker.key_for("w-late"),
                   announce(announce_hashes(tracker)[0], "10.0.0.9", 6881));
  for (int copy = 0; copy < 255; ++copy)
    ASSERT_TRUE(tracker.web_seed_allowed(blob, last, blob_size - last, "w-late"));
  EXPECT_FALSE(tracker.web_seed_allowed(blob, last, blob_size - last, "w-other"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  // w-late still announces, but went unnamed: one window, not four.
  EXPECT_TRUE(tracker.web_seed_allowed(blob, last, blob_size - last, "w-other"));
}

TEST_F(SwarmTrackerTest, APieceWhoseReplyWasCutShortGoesAgainAtOnce) {
  SwarmTracker tracker(*store, {}, SwarmTrackerOptions{.web_seed_copies = 1});
  const uint64_t piece = piece_bytes(tracker);
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece));
  EXPECT_FALSE(tracker.web_seed_allowed(blob, 0, piece));
  tracker.web_seed_cut(blob, 0, piece, 0);                // the worker closed before a byte
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 0, piece));  // nobody has it: it goes again
  tracker.web_seed_cut(blob, 0, piece, 100);  // most of it unread, but begun: a hostile worker
  EXPECT_FALSE(tracker.web_seed_allowed(blob, 0, piece));  // does not get to draw it again
  // Two pieces in one range, cut after the first: the first left whole and stays sent.
  EXPECT_TRUE(tracker.web_seed_allowed(blob, piece, 2 * piece));
  tracker.web_seed_cut(blob, piece, 2 * piece, piece);
  EXPECT_FALSE(tracker.web_seed_allowed(blob, piece, piece));
  EXPECT_TRUE(tracker.web_seed_allowed(blob, 2 * piece, piece));
  EXPECT_EQ(tracker.stats().web_seed_cut_bytes, piece + (piece - 100) + piece);
  EXPECT_EQ(tracker.stats().web_seed_resent_bytes, 0u);  // a first copy again, not a re-send
}

TEST_F(SwarmTrackerTest, SecondCopiesStopAtTheBlobsBudgetFirstCopiesDoNot) {
  SwarmTracker tracker(*store, {},
                       SwarmTrackerOptions{.web_seed_copies = 2, .web_seed_budget = 1.0});
  const uint64_t piece = piece_bytes(tracker);
  const uint64_t pieces = piece_count(piece);
  // Every piece but the last once: under one blob size.
  for (uint64_t p = 0; p + 1 < pieces; ++p)
    EXPECT_TRUE(tracker.web_seed_allowed(blob, p * piece, piece));
  ASSERT_GT((pieces - 1) * piece + piece, blob_size);          // no room for a whole piece more
  EXPECT_FALSE(tracker.web_seed_allowed(blob, piece, piece));  // a second copy past it
  const uint64_t last = (pieces - 1) * piece;
  EXPECT_TRUE(tracker.web_seed_allowed(blob, last, blob_size - last));  // a first copy still goes
  EXPECT_EQ(tracker.stats().web_seed_refusals, 1u);
}

TEST_F(SwarmTrackerTest, SecondCopiesLeaveRoomForTheFirstCopiesStillToGo) {
  // Many copies of one piece, asked for before any other piece left: without the room kept for
  // the first copies they would spend the whole budget and the hub would send more than it.
  SwarmTracker tracker(*store, {},
                       SwarmTrackerOptions{.web_seed_copies = 255, .web_seed_budget = 1.5});
  const uint64_t piece = piece_bytes(tracker);
  const uint64_t pieces = piece_count(piece);
  uint64_t sent = 0, copies = 0;
  while (tracker.web_seed_allowed(blob, 0, piece) && copies < 1000) {
    sent += piece;
    ++copies;
  }
  // The first copy plus as many more as fit in half a blob.
  EXPECT_EQ(copies, 1 + (blob_size / 2) / piece);
  for (uint64_t p = 1; p < pieces; ++p) {
    const uint64_t length = std::min(piece, blob_size - p * piece);
    ASSERT_TRUE(tracker.web_seed_allowed(blob, p * piece, length)) << p;  // first copies go
    sent += length;
  }
  EXPECT_LE(sent, blob_size + blob_size / 2);
  EXPECT_FALSE(tracker.web_seed_allowed(blob, piece, piece));  // and the budget is spent
}

TEST_F(SwarmTrackerTest, AWorkerMayProbeItsUplinkAFewTimesAMinute) {
  SwarmTracker tracker(*store, {});
  for (int i = 0; i < 12; ++i) EXPECT_EQ(tracker.uplink_probe_wait_ms("w-a"), 0) << i;
  const int64_t wait = tracker.uplink_probe_wait_ms("w-a");
  EXPECT_GT(wait, 0);
  EXPECT_LE(wait, 5000);                              // 12 a minute earned back
  EXPECT_EQ(tracker.uplink_probe_wait_ms("w-b"), 0);  // another worker's bucket is its own
}

TEST_F(SwarmTrackerTest, OnlyTheNewestTorrentsAreRemembered) {
  SwarmTracker tracker(*store, {});
  const std::vector<std::string> first = announce_hashes(tracker);
  const std::string key = tracker.key_for("w-a");
  for (size_t i = 0; i < SwarmTracker::kMaxTorrents; ++i) {
    const std::vector<uint8_t> other = {static_cast<uint8_t>(i), static_cast<uint8_t>(i >> 8), 1};
    tracker.torrent(store->put(other));
  }
  EXPECT_EQ(tracker.stats().torrents, SwarmTracker::kMaxTorrents);
  // The first blob's torrent was the oldest: forgotten, announces and all.
  EXPECT_NE(tracker.announce(key, announce(first[0], "10.0.0.1", 6881)).find("not a torrent"),
            std::string::npos);
  announce_hashes(tracker);  // asked for again: known again
  EXPECT_EQ(tracker.announce(key, announce(first[0], "10.0.0.1", 6881)).find("failure"),
            std::string::npos);
}

}  // namespace
}  // namespace stoa::hub
