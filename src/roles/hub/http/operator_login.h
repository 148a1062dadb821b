// The operator's browser login (issue 49 item 9): the operator token never travels in a URL, so
// it never lands in browser history or a proxy's log. `stoa hub` prints the dashboard's address
// with a one-time login code (/login?code=…); GET /login exchanges a live code once for a session
// cookie and redirects to the clean address. The login form at /login takes the operator token
// itself in a POST body (a code is spent, expired, or the hub restarted). The cookie is HttpOnly
// (no script reads it), SameSite=Strict (no other site's page sends it along: the operator routes
// are GETs that change nothing, and no cross-site request carries the session) and Secure when
// the hub serves TLS. Scripts and `stoa status` keep the bearer header. Everything is in memory:
// a restarted hub forgets its codes and sessions, and the operator logs in again.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "roles/hub/http/http_server.h"

namespace stoa::hub {

struct OperatorLoginOptions {
  std::chrono::seconds code_life{3600};      // a code printed at start works once within this
  std::chrono::seconds session_life{43200};  // a browser session: 12 h, then log in again
  bool secure_cookie = false;                // the hub serves TLS: the cookie goes over TLS only
};

class OperatorLogin {
 public:
  static constexpr const char* kCookie = "stoa_operator";

  explicit OperatorLogin(OperatorLoginOptions options);

  // A fresh one-time code (random, 128 bits) for /login?code=….
  std::string issue_code();
  // True when the request carries a live session cookie.
  bool has_session(const RequestContext& req);

  // GET /login?code=…: a live code → 303 to / with the session cookie, the code spent; a
  // wrong, spent or expired one → 401 with a page saying so and the form. GET /login alone:
  // the form. POST /login (form field `token`): `token_ok` decides; yes → 303 with the cookie.
  HttpReply login(const RequestContext& req,
                  const std::function<bool(const std::string&)>& token_ok);

  // 401 page for a browser opening an operator page without a session: the form.
  static HttpReply login_page(int status, const std::string& message);

 private:
  using Clock = std::chrono::steady_clock;
  HttpReply start_session();
  void forget_expired_locked(Clock::time_point now);

  OperatorLoginOptions options_;
  std::mutex mutex_;
  std::map<std::string, Clock::time_point> codes_;     // code -> expiry
  std::map<std::string, Clock::time_point> sessions_;  // cookie value -> expiry
};

// The value of cookie `name` in a Cookie header ("" when absent).
std::string cookie_value(const std::string& cookie_header, const std::string& name);
// application/x-www-form-urlencoded: the value of `field` ("" when absent).
std::string form_value(const std::string& body, const std::string& field);

}  // namespace stoa::hub
