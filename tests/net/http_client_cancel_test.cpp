// HttpClient::cancel() during a call blocked on an answer that never comes: a server that accepts
// and reads the request but never answers stands for a hub that stalled or a NAT that forgot the
// connection (its answer refused on the way). The call must end at the cancel, not at its read
// timeout, for a plain call (with retries left) and for a streaming download alike.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "net/http_client.h"

namespace stoa::net {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Accepts connections on a loopback port, reads what comes, never writes a byte.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        accepted_.push_back(c);  // held open, never answered
      }
    });
  }
  ~SilentServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    for (int c : accepted_) ::close(c);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::vector<int> accepted_;
  std::thread thread_;
};

TEST(HttpClientCancel, ACallWaitingOnASilentServerEndsAtTheCancelNotAtItsTimeout) {
  SilentServer server;
  HttpClientOptions options;
  options.read_timeout = 30s;
  HttpClient client(server.url(), options);
  const auto start = Clock::now();
  auto call = std::async(std::launch::async, [&] { client.get("/v1/version", true); });
  std::this_thread::sleep_for(300ms);
  client.cancel();
  ASSERT_EQ(call.wait_for(5s), std::future_status::ready) << "the cancel did not end the call";
  try {
    call.get();
    FAIL() << "a cancelled call has no answer";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNetwork);
    EXPECT_NE(std::string(e.what()).find("cancelled"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST(HttpClientCancel, AStreamingDownloadEndsAtTheCancel) {
  SilentServer server;
  HttpClient client(server.url());
  auto call = std::async(std::launch::async, [&] {
    return client.get_stream(
        "/v1/blobs/x", {}, [](int, const HttpClient::HeaderLookup&) { return true; },
        [](const char*, size_t) { return true; }, 30s);
  });
  std::this_thread::sleep_for(300ms);
  client.cancel();
  ASSERT_EQ(call.wait_for(5s), std::future_status::ready) << "the cancel did not end the download";
  EXPECT_FALSE(call.get().empty()) << "a cancelled download did not end cleanly";
  // After clear_cancel() the client works again (and waits as long as it is told to).
  client.clear_cancel();
  EXPECT_FALSE(client.cancelled());
}

}  // namespace
}  // namespace stoa::net
