// Blob downloads over bad links: spool to disk, resume with Range/If-Range through a proxy that
// cuts the connection every N bytes (the blob must arrive having moved <= 1.1x its bytes), a
// download interrupted for good resumes from the spool in a new call (a restarted worker), a
// changed ETag or a server that ignores Range restarts the blob cleanly, and a full disk is a
// clear error that keeps the spool.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "net/link_proxy.h"
#include "net/spool_download.h"
#include "support/error_of.h"
#include "support/file_text.h"
#include "support/loopback_server.h"
#include "support/temp_dir.h"

namespace stoa::net {
namespace {

namespace fs = std::filesystem;

// A link that falls over every `cut_after` bytes towards the client.
LinkProxyOptions cutting_link(int target_port, uint64_t cut_after) {
  LinkProxyOptions link;
  link.target_port = target_port;
  link.cut_after_bytes = cut_after;
  return link;
}

std::string make_body(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
  return s;
}

// A blob server with the hub's blob semantics (httplib answers a Range with 206 itself) plus the
// If-Range rule: a validator that is not the current ETag gets the whole body with 200.
class BlobServer {
 public:
  BlobServer() {
    server_.http.Get("/blob", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mutex_);
      ++requests_;
      const bool stale = req.has_header("If-Range") && req.get_header_value("If-Range") != etag_;
      // httplib slices the body by the request's ranges after the handler; a server that answers
      // the whole body (If-Range mismatch, or Range not supported) must drop them.
      if (stale || ignore_range_) const_cast<httplib::Request&>(req).ranges.clear();
      res.set_header("ETag", etag_);
      res.set_content(body_, "application/octet-stream");
    });
    server_.start();
  }
  void set(std::string body, std::string etag) {
    std::lock_guard lock(mutex_);
    body_ = std::move(body);
    etag_ = std::move(etag);
  }
  void ignore_range(bool on) { ignore_range_ = on; }
  int port() const { return server_.port(); }
  std::string url() const { return server_.url(); }

 private:
  std::mutex mutex_;
  std::string body_, etag_;
  std::atomic<bool> ignore_range_{false};
  int requests_ = 0;
  test::LoopbackServer server_;
};

struct SpoolTest : stoa::testing::TempDirTest {
  void SetUp() override { spool = (dir / "blob.part").string(); }
  static DownloadOptions fast() {
    DownloadOptions o;
    o.backoff_base = std::chrono::milliseconds(1);
    o.backoff_max = std::chrono::milliseconds(5);
    o.read_timeout = std::chrono::milliseconds(5000);
    return o;
  }
  std::string spool;
  BlobServer server;
};

TEST_F(SpoolTest, WholeBlobLandsInTheSpoolWithProgress) {
  const std::string body = make_body(3 << 20, 1);
  server.set(body, "\"v1\"");
  HttpClient http(server.url());
  DownloadOptions o = fast();
  DownloadProgress last;
  o.on_progress = [&](const DownloadProgress& p) { last = p; };
  DownloadStats s = download_to_spool(http, "/blob", spool, o);
  EXPECT_EQ(s.bytes, body.size());
  EXPECT_EQ(s.bytes_transferred, body.size());
  EXPECT_EQ(s.requests, 1);
  EXPECT_EQ(stoa::testing::read_text(spool), body);
  EXPECT_EQ(last.bytes, body.size());
  EXPECT_EQ(last.total, body.size());
  EXPECT_GT(last.bytes_per_s, 0);
  EXPECT_EQ(last.eta_s, 0);
}

TEST_F(SpoolTest, ResumesThroughAProxyThatCutsEveryHalfMegabyte) {
  const std::string body = make_body(6 << 20, 2);
  server.set(body, "\"v1\"");
  LinkProxy proxy(cutting_link(server.port(), 512 << 10));
  HttpClient http(proxy.url());
  DownloadStats s = download_to_spool(http, "/blob", spool, fast());
  EXPECT_EQ(stoa::testing::read_text(spool), body);
  EXPECT_GE(proxy.counters().cuts, 10u);
  EXPECT_EQ(s.resumes, s.requests - 1);
  EXPECT_EQ(s.restarts, 0);
  // Headers included, what moved over the link is at most 1.1x the blob.
  EXPECT_LE(static_cast<double>(proxy.counters().bytes_to_client),
            1.1 * static_cast<double>(body.size()));
}

TEST_F(SpoolTest, ANewCallResumesWhatAnInterruptedOneLeftInTheSpool) {
  const std::string body = make_body(4 << 20, 3);
  server.set(body, "\"v1\"");
  {
    // The link falls over after 1.5 MB and then delivers nothing: the first "worker" gives up,
    // the spool stays.
    LinkProxy proxy(cutting_link(server.port(), 1536 << 10));
    HttpClient http(proxy.url());
    DownloadOptions o = fast();
    o.max_attempts_without_progress = 1;
    EXPECT_THROW(
        {
          DownloadOptions once = o;
          once.on_progress = [&](const DownloadProgress& p) {
            if (p.bytes > (1 << 20)) proxy.set_cut_after(1);
          };
          once.progress_interval = std::chrono::milliseconds(0);
          download_to_spool(http, "/blob", spool, once);
        },
        Error);
  }
  const uint64_t kept = fs::file_size(spool);
  ASSERT_GT(kept, 1u << 20);
  ASSERT_LT(kept, body.size());
  HttpClient http(server.url());  // the restarted worker
  DownloadStats s = download_to_spool(http, "/blob", spool, fast());
  EXPECT_EQ(s.resumed_from, kept);
  EXPECT_EQ(s.bytes_transferred, body.size() - kept);
  EXPECT_EQ(s.resumes, 1);
  EXPECT_EQ(stoa::testing::read_text(spool), body);
}

TEST_F(SpoolTest, AChangedETagRestartsTheBlobCleanly) {
  const std::string old_body = make_body(1 << 20, 4);
  const std::string new_body = make_body(2 << 20, 5);
  // What a download of the old body left behind.
  std::ofstream(spool, std::ios::binary).write(old_body.data(), 300000);
  std::ofstream(spool + ".etag") << "\"old\"\n";
  server.set(new_body, "\"new\"");
  HttpClient http(server.url());
  DownloadStats s = download_to_spool(http, "/blob", spool, fast());
  EXPECT_EQ(s.restarts, 1);
  EXPECT_EQ(s.resumes, 0);
  EXPECT_EQ(stoa::testing::read_text(spool), new_body);
  EXPECT_EQ(stoa::testing::read_text(spool + ".etag"), "\"new\"\n");
}

TEST_F(SpoolTest, AServerIgnoringRangeRestartsTheBlobCleanly) {
  const std::string body = make_body(1 << 20, 6);
  std::ofstream(spool, std::ios::binary).write(body.data(), 400000);
  std::ofstream(spool + ".etag") << "\"v1\"\n";
  server.set(body, "\"v1\"");
  server.ignore_range(true);
  HttpClient http(server.url());
  DownloadStats s = download_to_spool(http, "/blob", spool, fast());
  EXPECT_EQ(s.restarts, 1);
  EXPECT_EQ(s.bytes_transferred, body.size());
  EXPECT_EQ(stoa::testing::read_text(spool), body);
}

TEST_F(SpoolTest, ACompleteSpoolIsNotFetchedAgain) {
  const std::string body = make_body(1 << 20, 7);
  server.set(body, "\"v1\"");
  HttpClient http(server.url());
  download_to_spool(http, "/blob", spool, fast());
  DownloadStats s = download_to_spool(http, "/blob", spool, fast());  // 416: nothing after the end
  EXPECT_EQ(s.bytes, body.size());
  EXPECT_EQ(s.bytes_transferred, 0u);
  EXPECT_EQ(stoa::testing::read_text(spool), body);
}

TEST_F(SpoolTest, AFullDiskIsAClearErrorAndKeepsTheSpool) {
  server.set(make_body(1 << 20, 8), "\"v1\"");
  fs::create_symlink("/dev/full", spool);  // every write: ENOSPC
  HttpClient http(server.url());
  const Error full_disk =
      stoa::test::error_of([&] { download_to_spool(http, "/blob", spool, fast()); },
                           "a write to a full disk must throw");
  EXPECT_EQ(full_disk.kind(), ErrorKind::kIo);
  EXPECT_NE(std::string(full_disk.what()).find("disk full"), std::string::npos) << full_disk.what();
  EXPECT_NE(std::string(full_disk.what()).find("kept"), std::string::npos) << full_disk.what();
  EXPECT_TRUE(fs::is_symlink(spool));
  EXPECT_EQ(stoa::testing::read_text(spool + ".etag"), "\"v1\"\n");
}

TEST_F(SpoolTest, AMissingBlobFailsAtOnce) {
  HttpClient http(server.url());
  const Error missing = stoa::test::error_of(
      [&] { download_to_spool(http, "/nothing", spool, fast()); }, "a 404 must throw");
  EXPECT_EQ(missing.kind(), ErrorKind::kNetwork);
  EXPECT_NE(std::string(missing.what()).find("404"), std::string::npos) << missing.what();
}

}  // namespace
}  // namespace stoa::net
