// The operator's browser login (roles/hub/http/operator_login.h, issue 49 item 9) over real HTTP
// on a hub bound off loopback: the dashboard link `stoa hub` prints holds a one-time code, not
// the operator token; /login trades it once for an HttpOnly, SameSite=Strict cookie (Secure over
// TLS) and redirects to the clean address; the cookie opens the operator pages; a spent, wrong or
// expired code, a forged cookie and a wrong token in the form are refused with 401.
#include <httplib.h>

#include <thread>

#include "roles/hub/http/operator_login.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"
#include "roles/hub/identity/tls_identity.h"

namespace stoa::hub::testing {
namespace {

class OperatorLoginOverHttp : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    config.operator_token = "op-secret";
  }
  void serve_off_loopback(ServerOptions so = {}) {
    open_hub();
    publish(1);
    so.host = "0.0.0.0";
    serve(so);
  }
  httplib::Result get(const std::string& path, const httplib::Headers& h = {}) {
    httplib::Client c("127.0.0.1", server->port());
    return c.Get(path.c_str(), h);
  }
  // The path and query of the link `stoa hub` prints (/login?code=…).
  std::string dashboard_link() {
    const std::string url = server->dashboard_url();
    return url.substr(url.find("/login"));
  }
  // The cookie a login's Set-Cookie carries, as a browser sends it back ("name=value").
  static std::string cookie_of(const httplib::Result& r) {
    const std::string set = r->get_header_value("Set-Cookie");
    return set.substr(0, set.find(';'));
  }
};

TEST_F(OperatorLoginOverHttp, ACodeLogsInOnceAndTheCookieOpensTheOperatorPages) {
  serve_off_loopback();
  const std::string link = dashboard_link();
  ASSERT_EQ(link.rfind("/login?code=", 0), 0u) << link;
  EXPECT_EQ(link.find("op-secret"), std::string::npos) << "the token is never in the link";

  auto login = get(link);
  ASSERT_TRUE(login);
  EXPECT_EQ(login->status, 303);
  EXPECT_EQ(login->get_header_value("Location"), "/") << "on to the clean address";
  const std::string set = login->get_header_value("Set-Cookie");
  EXPECT_NE(set.find("HttpOnly"), std::string::npos) << set;
  EXPECT_NE(set.find("SameSite=Strict"), std::string::npos) << set;
  EXPECT_EQ(set.find("Secure"), std::string::npos) << "plain HTTP: " << set;
  const httplib::Headers browser = {{"Cookie", "theme=dark; " + cookie_of(login)}};
  for (const char* path : {"/", "/v1/status?limit=5", "/v1/history", "/metrics"}) {
    auto r = get(path, browser);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
  }
  EXPECT_NE(get("/", browser)->body.find("<title>Stoa hub</title>"), std::string::npos);

  // The same link again (the browser's history, someone else's screen): refused, said plainly.
  auto again = get(link);
  EXPECT_EQ(again->status, 401);
  EXPECT_NE(again->body.find("used already"), std::string::npos) << again->body;
  // Scripts and `stoa status` keep the bearer header; nothing opens without one or the cookie.
  EXPECT_EQ(get("/v1/status", {{"Authorization", "Bearer op-secret"}})->status, 200);
  EXPECT_EQ(get("/v1/status")->status, 401);
}

TEST_F(OperatorLoginOverHttp, WrongCodesForgedCookiesAndWrongTokensAreRefused) {
  serve_off_loopback();
  auto wrong = get("/login?code=0123456789abcdef0123456789abcdef");
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(wrong->get_header_value("Set-Cookie"), "");
  EXPECT_NE(wrong->body.find("<form method=\"post\" action=\"/login\">"), std::string::npos);
  const httplib::Headers forged = {
      {"Cookie", std::string(OperatorLogin::kCookie) + "=0123456789abcdef0123456789abcdef"}};
  EXPECT_EQ(get("/v1/status", forged)->status, 401);
  auto page = get("/", forged);
  EXPECT_EQ(page->status, 401);
  EXPECT_NE(page->body.find("Log in"), std::string::npos) << page->body;

  // The form: the token in a POST body (never the URL). A worker's join token is not it.
  httplib::Client c("127.0.0.1", server->port());
  for (const char* token : {"join-secret", "op-secre", ""}) {
    auto r = c.Post("/login", std::string("token=") + token, "application/x-www-form-urlencoded");
    EXPECT_EQ(r->status, 401) << token;
    EXPECT_EQ(r->get_header_value("Set-Cookie"), "") << token;
  }
  auto ok = c.Post("/login", "token=op%2Dsecret", "application/x-www-form-urlencoded");
  EXPECT_EQ(ok->status, 303);
  EXPECT_EQ(get("/v1/status", {{"Cookie", cookie_of(ok)}})->status, 200);
}

TEST(OperatorLogin, AnExpiredCodeIsRefused) {
  OperatorLoginOptions o;
  o.code_life = std::chrono::seconds(1);
  OperatorLogin login(o);
  const std::string code = login.issue_code();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  RequestContext req;
  req.method = "GET";
  req.path = "/login";
  req.query["code"] = code;
  const HttpReply r = login.login(req, [](const std::string&) { return true; });
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("expired"), std::string::npos) << r.body;
}

TEST(OperatorLogin, CookieAndFormFieldsAreReadExactly) {
  EXPECT_EQ(cookie_value("a=1; stoa_operator=xyz; b=2", "stoa_operator"), "xyz");
  EXPECT_EQ(cookie_value("xstoa_operator=no", "stoa_operator"), "");
  EXPECT_EQ(form_value("x=1&token=a%2Bb+c", "token"), "a+b c");
  EXPECT_EQ(form_value("tokenx=1", "token"), "");
}

TEST_F(OperatorLoginOverHttp, OverTlsTheCookieIsSecure) {
  const auto tls = ensure_self_signed_certificate((dir / "tls").string(), "127.0.0.1");
  ServerOptions so;
  so.tls_cert_path = tls.cert_path;
  so.tls_key_path = tls.key_path;
  serve_off_loopback(so);
  const std::string url = server->dashboard_url();
  EXPECT_EQ(url.rfind("https://", 0), 0u) << url;
  httplib::SSLClient c("127.0.0.1", server->port());
  c.enable_server_certificate_verification(false);  // the pin is tested in identity_test.cpp
  auto r = c.Get(url.substr(url.find("/login")).c_str());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 303);
  EXPECT_NE(r->get_header_value("Set-Cookie").find("; Secure"), std::string::npos)
      << r->get_header_value("Set-Cookie");
}

}  // namespace
}  // namespace stoa::hub::testing
