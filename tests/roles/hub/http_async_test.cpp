// The hub's async HTTP front end under the abuse of issue 18: parked long-polls hold no thread
// (status stays fast with 40 of them), slow-header clients are cut off at the deadline without
// blocking anyone, a long-poll client that went away is dropped at once, a per-IP connection
// cap, the idle keep-alive timeout, and blobs served with Range / If-Range / 416; a file body
// tells its owner whether it left whole or was cut short.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "net/hub_client.h"

#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"
#include "support/self_signed_cert.h"

namespace stoa::hub::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A raw TCP connection to the hub (optionally from another loopback source address).
class RawSocket {
 public:
  RawSocket(int port, const char* source = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in src{};
    src.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &src.sin_addr);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof(src));
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) == 0;
  }
  ~RawSocket() { close(); }
  bool connected() const { return connected_; }
  bool send(const std::string& s) {
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // Everything the server sends within `wait`, stopping early at EOF. closed(): EOF seen.
  std::string read_for(std::chrono::milliseconds wait) {
    std::string out;
    auto until = Clock::now() + wait;
    while (Clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
      if (::poll(&p, 1, std::max(1, left)) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  bool closed() const { return closed_; }
  // What the kernel may hold for this socket unread (SO_RCVBUF, as getsockopt reports it).
  int receive_buffer() const {
    int bytes = 0;
    socklen_t len = sizeof bytes;
    ::getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, &len);
    return bytes;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
};

class HttpAsync : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    open_hub();
    publish(1);
  }
  std::string session_token() {
    httplib::Client c("127.0.0.1", server->port());
    auto r = c.Post("/v1/join", {{"Authorization", "Bearer join-secret"}},
                    R"({"protocol":1,"arithmetic":2})", "application/json");
    EXPECT_TRUE(r && r->status == 200);
    return nlohmann::json::parse(r->body)["session_token"];
  }
  // Waits up to 5 s for `pred` on the server's stats.
  template <typename Pred>
  bool eventually(Pred pred) {
    for (int i = 0; i < 500; ++i) {
      if (pred(server->stats())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  double status_seconds() {
    httplib::Client c("127.0.0.1", server->port());
    auto t0 = Clock::now();
    auto r = c.Get("/v1/status");
    EXPECT_TRUE(r && r->status == 200);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
};

TEST_F(HttpAsync, FortyParkedLongPollsLeaveStatusFastAndAllWakeOnPublish) {
  ServerOptions so;
  so.threads = 2;  // far fewer threads than waiting clients
  serve(so);
  const std::string token = session_token();
  constexpr int kClients = 40;
  std::vector<std::thread> clients;
  std::atomic<int> woke_with_2{0};
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&] {
      httplib::Client c("127.0.0.1", server->port());
      c.set_read_timeout(30, 0);
      auto r = c.Get("/v1/version?after=1&timeout=20", {{"Authorization", "Bearer " + token}});
      if (r && r->status == 200 && nlohmann::json::parse(r->body)["version"] == 2) ++woke_with_2;
    });
  }
  ASSERT_TRUE(eventually([](const HttpServerStats& s) { return s.parked == kClients; }));
  EXPECT_LT(status_seconds(), 1.0);
  auto t0 = Clock::now();
  publish(2);
  for (auto& t : clients) t.join();
  EXPECT_EQ(woke_with_2.load(), kClients);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  EXPECT_EQ(server->stats().parked, 0u);
}

TEST_F(HttpAsync, SlowHeaderClientsAreCutAtTheDeadlineWithoutBlockingOthers) {
  ServerOptions so;
  so.threads = 2;
  so.header_timeout_s = 1;
  serve(so);
  std::vector<std::unique_ptr<RawSocket>> slow;
  for (int i = 0; i < 40; ++i) {
    slow.push_back(std::make_unique<RawSocket>(server->port()));
    ASSERT_TRUE(slow.back()->connected());
    slow.back()->send("GET /v1/status HTTP/1.1\r\nHo");
  }
  auto t0 = Clock::now();
  // One more byte each, well inside a per-read timeout but not inside the whole-request one.
  for (int round = 0; round < 3; ++round) {
    EXPECT_LT(status_seconds(), 0.5);
    for (auto& s : slow) s->send("s");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (auto& s : slow) {
    std::string got = s->read_for(std::chrono::milliseconds(3000));
    EXPECT_TRUE(s->closed());
    EXPECT_EQ(got.find("200 OK"), std::string::npos);
  }
  double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(took, 3.0);
  EXPECT_TRUE(eventually([](const HttpServerStats& s) { return s.connections == 0; }));
  EXPECT_GE(server->stats().timed_out, 40u);
  EXPECT_LT(status_seconds(), 0.5);
}

TEST_F(HttpAsync, AParkedClientThatWentAwayIsReleasedAtOnce) {
  serve();
  const std::string token = session_token();
  RawSocket s(server->port());
  ASSERT_TRUE(s.connected());
  s.send("GET /v1/version?after=1&timeout=60 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
         token + "\r\n\r\n");
  ASSERT_TRUE(eventually([](const HttpServerStats& st) { return st.parked == 1; }));
  s.close();
  auto t0 = Clock::now();
  ASSERT_TRUE(
      eventually([](const HttpServerStats& st) { return st.parked == 0 && st.connections == 0; }));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.0);
  EXPECT_EQ(server->stats().gone_while_parked, 1u);
}

TEST_F(HttpAsync, ConnectionsPerIpAreCapped) {
  ServerOptions so;
  so.max_connections_per_ip = 3;
  serve(so);
  std::vector<std::unique_ptr<RawSocket>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<RawSocket>(server->port()));
  ASSERT_TRUE(eventually([](const HttpServerStats& st) { return st.connections == 3; }));
  RawSocket over(server->port());
  std::string answer = over.read_for(std::chrono::milliseconds(2000));
  EXPECT_NE(answer.find("503"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Retry-After:"), std::string::npos) << answer;
  EXPECT_TRUE(over.closed());
  EXPECT_EQ(server->stats().refused_connections, 1u);
  // Another address is not affected, and the first address gets its place back.
  RawSocket other(server->port(), "127.0.0.2");
  other.send("GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(other.read_for(std::chrono::milliseconds(500)).find("200 OK"), std::string::npos);
  held.pop_back();
  ASSERT_TRUE(eventually([](const HttpServerStats& st) { return st.connections == 3; }));
  RawSocket again(server->port());
  again.send("GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(again.read_for(std::chrono::milliseconds(500)).find("200 OK"), std::string::npos);
}

TEST_F(HttpAsync, IdleKeepAliveConnectionsAreClosed) {
  ServerOptions so;
  so.idle_timeout_s = 1;
  serve(so);
  RawSocket s(server->port());
  s.send("GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string first = s.read_for(std::chrono::milliseconds(300));
  EXPECT_NE(first.find("200 OK"), std::string::npos);
  EXPECT_FALSE(s.closed());
  s.read_for(std::chrono::milliseconds(2500));
  EXPECT_TRUE(s.closed());
}

TEST_F(HttpAsync, BlobsAnswerRangesIfRangeAndUnsatisfiableRanges) {
  serve();
  const std::string token = session_token();
  // Larger than the server's 256 KiB file chunk, so the body crosses several writes.
  std::vector<uint8_t> bytes(700'001);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + i / 251);
  Hash128 h = store->put(bytes);
  const std::string path = "/v1/blobs/" + h.hex(), etag = "\"" + h.hex() + "\"";
  const std::string size = std::to_string(bytes.size());
  httplib::Client c("127.0.0.1", server->port());
  auto get = [&](httplib::Headers extra) {
    extra.emplace("Authorization", "Bearer " + token);
    auto r = c.Get(path.c_str(), extra);
    EXPECT_TRUE(r);
    return r;
  };
  auto slice = [&](size_t a, size_t n) {
    return std::string(bytes.begin() + a, bytes.begin() + a + n);
  };

  auto full = get({});
  EXPECT_EQ(full->status, 200);
  EXPECT_EQ(full->body, slice(0, bytes.size()));
  EXPECT_EQ(full->get_header_value("Accept-Ranges"), "bytes");
  EXPECT_EQ(full->get_header_value("ETag"), etag);

  auto mid = get({{"Range", "bytes=100-199"}});
  EXPECT_EQ(mid->status, 206);
  EXPECT_EQ(mid->body, slice(100, 100));
  EXPECT_EQ(mid->get_header_value("Content-Range"), "bytes 100-199/" + size);

  auto tail = get({{"Range", "bytes=300000-"}});  // a resume
  EXPECT_EQ(tail->status, 206);
  EXPECT_EQ(tail->body, slice(300000, bytes.size() - 300000));
  EXPECT_EQ(tail->get_header_value("Content-Range"), "bytes 300000-700000/" + size);

  auto suffix = get({{"Range", "bytes=-10"}});
  EXPECT_EQ(suffix->status, 206);
  EXPECT_EQ(suffix->body, slice(bytes.size() - 10, 10));

  auto same = get({{"Range", "bytes=5-9"}, {"If-Range", etag}});
  EXPECT_EQ(same->status, 206);
  EXPECT_EQ(same->body, slice(5, 5));
  auto changed = get({{"Range", "bytes=5-9"}, {"If-Range", "\"0123\""}});
  EXPECT_EQ(changed->status, 200);
  EXPECT_EQ(changed->body.size(), bytes.size());

  auto beyond = get({{"Range", "bytes=" + size + "-"}});
  EXPECT_EQ(beyond->status, 416);
  EXPECT_EQ(beyond->get_header_value("Content-Range"), "bytes */" + size);
  EXPECT_TRUE(nlohmann::json::parse(beyond->body).contains("error"));

  // The connection is still usable after all of that (keep-alive through file bodies).
  EXPECT_EQ(get({{"Range", "bytes=0-0"}})->body, slice(0, 1));
}

TEST_F(HttpAsync, OverTlsLongPollsParkAndBlobsAnswerRanges) {
  auto cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  if (!stoa::test::make_self_signed_cert(cert, key)) GTEST_SKIP() << "openssl CLI unavailable";
  ServerOptions so;
  so.tls_cert_path = cert;
  so.tls_key_path = key;
  serve(so);
  ASSERT_TRUE(server->tls());
  net::HttpClientOptions o;
  o.ca_cert_path = cert;
  net::HubClient client(server->url(), o);
  auto joined = client.join("join-secret", {});
  std::thread publisher([&] {
    if (eventually([](const HttpServerStats& st) { return st.parked == 1; })) publish(2);
  });
  auto t0 = Clock::now();
  auto v = client.version(1, std::chrono::seconds(20));
  publisher.join();
  EXPECT_EQ(v.version.value_or(0), 2u);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);

  std::vector<uint8_t> bytes(300'000, 7);
  bytes[123'456] = 9;
  Hash128 h = store->put(bytes);
  EXPECT_EQ(client.blob(h.hex()), bytes);
  httplib::SSLClient c("127.0.0.1", server->port());
  c.set_ca_cert_path(cert.c_str());
  auto r = c.Get(
      ("/v1/blobs/" + h.hex()).c_str(),
      {{"Authorization", "Bearer " + joined.session_token}, {"Range", "bytes=123456-123457"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 206);
  EXPECT_EQ(r->body, std::string("\x09\x07", 2));
}

// A file body's owner learns how it ended: whole, or cut short by a client that went away (what
// the swarm's web seed uses to take back a piece nobody received).
TEST(HttpFileBody, TheOwnerLearnsWhetherTheBodyArrivedWholeOrWasCutShort) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("stoa_file_body_" + std::to_string(::getpid())))
          .string();
  constexpr uint64_t kBytes = 32u << 20;  // more than loopback's socket buffers hold
  {
    std::ofstream out(path, std::ios::binary);
    const std::string block(1 << 20, 'x');
    for (uint64_t i = 0; i < kBytes; i += block.size()) out << block;
  }
  std::atomic<int> ends{0}, whole{0};
  std::atomic<uint64_t> written{0};
  HttpServer server({}, [&](const RequestContext&) -> HandlerOutcome {
    HttpReply reply;
    reply.content_type = "application/octet-stream";
    reply.file = FileBody{path, 0, kBytes, [&](bool complete, uint64_t n) {
                            whole += complete;
                            written = n;
                            ++ends;
                          }};
    return reply;
  });
  server.start();
  auto wait_end = [&](int n) {
    for (int i = 0; i < 500 && ends < n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return ends.load() == n;
  };
  {
    RawSocket reader(server.port());
    ASSERT_TRUE(reader.send("GET /f HTTP/1.1\r\nHost: x\r\n\r\n"));
    size_t got = 0;
    while (got < kBytes && !reader.closed())
      got += reader.read_for(std::chrono::milliseconds(50)).size();
    ASSERT_TRUE(wait_end(1));
    EXPECT_EQ(whole.load(), 1);
    EXPECT_EQ(written.load(), kBytes);
  }
  {
    RawSocket quitter(server.port());
    ASSERT_TRUE(quitter.send("GET /f HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the buffers fill
    const uint64_t could_hold = static_cast<uint64_t>(quitter.receive_buffer());
    quitter.close();  // unread: most of the body still to come
    ASSERT_TRUE(wait_end(2));
    EXPECT_EQ(whole.load(), 1);
    // Delivered is what the quitter's TCP acknowledged — at most what its receive buffer took —
    // not the megabytes handed to the hub's socket and left in its send queue.
    EXPECT_LE(written.load(), could_hold);
  }
  server.stop();
  std::filesystem::remove(path);
}

// Many file bodies on one keep-alive connection: each owner hears of its body once, whole. (The
// bodies settle in a queue whose blocks are freed as it turns over; the sanitizer tree runs this.)
TEST(HttpFileBody, EveryBodyOfAKeepAliveConnectionIsSettledOnce) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("stoa_file_bodies_" + std::to_string(::getpid())))
          .string();
  constexpr uint64_t kBytes = 3000;
  constexpr int kRequests = 40;  // several turns of the queue's blocks
  std::ofstream(path, std::ios::binary) << std::string(kBytes, 'y');
  std::atomic<int> ends{0}, whole{0};
  HttpServer server({}, [&](const RequestContext&) -> HandlerOutcome {
    HttpReply reply;
    reply.content_type = "application/octet-stream";
    reply.file = FileBody{path, 0, kBytes, [&](bool complete, uint64_t n) {
                            whole += complete && n == kBytes;
                            ++ends;
                          }};
    return reply;
  });
  server.start();
  {
    RawSocket client(server.port());
    for (int i = 0; i < kRequests; ++i) {
      ASSERT_TRUE(client.send("GET /f HTTP/1.1\r\nHost: x\r\n\r\n"));
      std::string got;
      for (int tries = 0; tries < 100 && !client.closed(); ++tries) {
        got += client.read_for(std::chrono::milliseconds(20));
        const size_t head = got.find("\r\n\r\n");
        if (head != std::string::npos && got.size() >= head + 4 + kBytes) break;
      }
      ASSERT_EQ(got.size(), got.find("\r\n\r\n") + 4 + kBytes) << "request " << i;
    }
    for (int i = 0; i < 300 && ends < kRequests; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ends.load(), kRequests);
  EXPECT_EQ(whole.load(), kRequests);
  server.stop();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace stoa::hub::testing
