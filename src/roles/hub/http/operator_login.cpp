// The operator's browser login (operator_login.h).
#include "roles/hub/http/operator_login.h"

#include <functional>

#include "core/error.h"
#include "net/protocol.h"

namespace stoa::hub {

namespace {

// At most this many live browser sessions: each login past it pushes out the oldest.
constexpr size_t kMaxSessions = 256;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string form_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 &&
               hex_digit(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

std::string cookie_value(const std::string& cookie_header, const std::string& name) {
  size_t at = 0;
  while (at <= cookie_header.size()) {
    size_t end = cookie_header.find(';', at);
    if (end == std::string::npos) end = cookie_header.size();
    const std::string pair = trim(cookie_header.substr(at, end - at));
    const size_t eq = pair.find('=');
    if (eq != std::string::npos && pair.substr(0, eq) == name) return pair.substr(eq + 1);
    at = end + 1;
  }
  return "";
}

std::string form_value(const std::string& body, const std::string& field) {
  size_t at = 0;
  while (at <= body.size()) {
    size_t end = body.find('&', at);
    if (end == std::string::npos) end = body.size();
    const std::string pair = body.substr(at, end - at);
    const size_t eq = pair.find('=');
    if (eq != std::string::npos && form_decode(pair.substr(0, eq)) == field)
      return form_decode(pair.substr(eq + 1));
    at = end + 1;
  }
  return "";
}

OperatorLogin::OperatorLogin(OperatorLoginOptions options) : options_(options) {}

std::string OperatorLogin::issue_code() {
  const std::string code = net::random_token();
  std::lock_guard<std::mutex> lock(mutex_);
  forget_expired_locked(Clock::now());
  codes_[code] = Clock::now() + options_.code_life;
  return code;
}

void OperatorLogin::forget_expired_locked(Clock::time_point now) {
  for (auto* m : {&codes_, &sessions_})
    std::erase_if(*m, [now](const auto& e) { return e.second <= now; });
}

bool OperatorLogin::has_session(const RequestContext& req) {
  const std::string value = cookie_value(req.header("cookie"), kCookie);
  if (value.empty()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sessions_.find(value);
  return it != sessions_.end() && it->second > Clock::now();
}

HttpReply OperatorLogin::start_session() {
  const std::string value = net::random_token() + net::random_token();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = Clock::now();
    forget_expired_locked(now);
    while (sessions_.size() >= kMaxSessions) {
      auto oldest = sessions_.begin();
      for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
        if (it->second < oldest->second) oldest = it;
      sessions_.erase(oldest);
    }
    sessions_[value] = now + options_.session_life;
  }
  HttpReply r;
  r.status = 303;  // the browser goes on to the clean address with a GET; the code leaves the bar
  r.content_type = "text/plain; charset=utf-8";
  r.body = "logged in: see /\n";
  r.headers.emplace_back("Location", "/");
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back(
      "Set-Cookie", cat(kCookie, "=", value, "; Path=/; Max-Age=", options_.session_life.count(),
                        "; HttpOnly; SameSite=Strict", options_.secure_cookie ? "; Secure" : ""));
  return r;
}

HttpReply OperatorLogin::login(const RequestContext& req,
                               const std::function<bool(const std::string&)>& token_ok) {
  if (req.method == "POST") {
    const std::string token = form_value(req.body, "token");
    if (!token.empty() && token_ok(token)) return start_session();
    return login_page(401, "That is not this hub's operator token.");
  }
  if (!req.has_query("code")) return login_page(200, "");
  bool live = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    forget_expired_locked(Clock::now());
    live = codes_.erase(req.query.at("code")) == 1;  // spent here: a code works once
  }
  if (live) return start_session();
  return login_page(401,
                    "This login link was used already, has expired, or is not from this hub "
                    "(a restarted hub prints a new one). Log in with the operator token instead.");
}

HttpReply OperatorLogin::login_page(int status, const std::string& message) {
  HttpReply r;
  r.status = status;
  r.content_type = "text/html; charset=utf-8";
  r.headers.emplace_back("Cache-Control", "no-store");
  // `message` is always one of this file's own sentences: no request data reaches the markup.
  r.body = cat(
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>Stoa hub: log in</title></head>"
      "<body style=\"font:14px system-ui,sans-serif;margin:2em\"><h1>Stoa hub: log in</h1>",
      message.empty() ? "" : cat("<p style=\"color:#b00\">", message, "</p>"),
      "<p>Open the dashboard link <code>stoa hub</code> printed (it works once), or give the "
      "operator token (<code>[hub] operator_token</code>, or the file <code>operator_token</code> "
      "in the run directory):</p><form method=\"post\" action=\"/login\">"
      "<input type=\"password\" name=\"token\" size=\"40\" autocomplete=\"off\"> "
      "<button type=\"submit\">Log in</button></form></body></html>\n");
  return r;
}

}  // namespace stoa::hub
