// `stoa status` finds and trusts its hub from a join string or the run directory: the join
// string's pinned fingerprint and token, hub.json and operator_token in the run directory; and it
// reads a live TLS hub with no --ca-cert from either.
#include "app/status/status_target.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "app/status/status_watch.h"
#include "core/error.h"
#include "net/join_string.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"
#include "roles/hub/identity/tls_identity.h"

namespace stoa::app {
namespace {

const std::string kPin(64, 'a');

TEST(StatusTarget, AJoinStringGivesUrlPinAndToken) {
  const std::string join = net::format_join_string({"https://10.0.0.5:8443", "op-token", kPin});
  const StatusTarget t = resolve_status_target(join, "", "", "");
  EXPECT_EQ(t.hub_url, "https://10.0.0.5:8443");
  EXPECT_EQ(t.pin_sha256, kPin);
  EXPECT_EQ(t.operator_token, "op-token");
  // What the operator says explicitly wins.
  const StatusTarget u = resolve_status_target(join, "", "other", "/ca.pem");
  EXPECT_EQ(u.operator_token, "other");
  EXPECT_EQ(u.ca_cert_path, "/ca.pem");
  EXPECT_EQ(u.pin_sha256, "");
  // A plain URL is taken as it is, with no token or pin of its own (net::parse_join_string_or_url,
  // which `stoa train --hub` reads its hub with too).
  const StatusTarget plain = resolve_status_target("http://127.0.0.1:9", "", "", "");
  EXPECT_EQ(plain.hub_url, "http://127.0.0.1:9");
  EXPECT_EQ(plain.operator_token, "");
  EXPECT_EQ(plain.pin_sha256, "");
  EXPECT_EQ(net::parse_join_string_or_url(join).token, "op-token");
  EXPECT_THROW(net::parse_join_string_or_url("ftp://x#token=t"), Error) << "a bad join string";
}

class StatusTargetRunDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("stoa_status_target_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
  }
  std::filesystem::path dir;
};

TEST_F(StatusTargetRunDir, ReadsHubJsonAndTheOperatorToken) {
  const std::string join = net::format_join_string({"https://myhost:8443", "work-token", kPin});
  write("hub.json", nlohmann::json({{"url", "https://0.0.0.0:8443"}, {"join", join}}).dump());
  write("operator_token", "op-secret\n");
  const StatusTarget t = resolve_status_target("", dir.string(), "", "");
  EXPECT_EQ(t.hub_url, "https://127.0.0.1:8443");  // bound to every interface: reached locally
  EXPECT_EQ(t.pin_sha256, kPin);
  EXPECT_EQ(t.operator_token, "op-secret");  // the operator's, not the join string's work token
}

TEST_F(StatusTargetRunDir, NoHubJsonSaysTheHubIsNotServing) {
  write("hub_port", "8443\n");
  try {
    resolve_status_target("", dir.string(), "", "");
    FAIL() << "no hub.json must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("8443"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_status_target("", "", "", ""), Error);
  EXPECT_THROW(resolve_status_target("http://h:1", dir.string(), "", ""), Error);
}

class StatusFromTlsHub : public hub::testing::HubFixture {};

// The hub's self-signed certificate is trusted through the pin hub.json's join string carries:
// no --ca-cert needed (without the pin the client refuses the certificate).
TEST_F(StatusFromTlsHub, OnceReadsATlsHubFromItsRunDirectory) {
  open_hub();
  publish(0);
  join("volunteer-laptop");
  hub::ServerOptions so;
  const hub::TlsIdentity id =
      hub::ensure_self_signed_certificate((dir / "tls").string(), "127.0.0.1");
  so.tls_cert_path = id.cert_path;
  so.tls_key_path = id.key_path;
  hub::HubServer server(*hub, so);
  server.start();
  const std::string join_string = hub::hub_join_string(server, so, "join-secret", id.sha256);
  std::ofstream(dir / "hub.json") << nlohmann::json({{"url", server.url()}, {"join", join_string}});

  for (const StatusTarget& t : {resolve_status_target("", dir.string(), "", ""),
                                resolve_status_target(join_string, "", "", "")}) {
    StatusWatchOptions options;
    options.hub_url = t.hub_url;
    options.pin_sha256 = t.pin_sha256;
    options.operator_token = t.operator_token;
    options.once = true;
    std::FILE* out = std::tmpfile();
    ASSERT_NE(out, nullptr);
    std::atomic<bool> stop{false};
    ASSERT_EQ(watch_status(options, stop, out), 0) << t.hub_url;
    std::rewind(out);
    std::string screen(1 << 16, '\0');
    screen.resize(std::fread(screen.data(), 1, screen.size(), out));
    std::fclose(out);
    EXPECT_NE(screen.find("volunteer-laptop"), std::string::npos) << screen;
  }
}

}  // namespace
}  // namespace stoa::app
