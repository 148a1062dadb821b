#include "net/join_string.h"

#include "core/error.h"

namespace stoa::net {

std::string format_join_string(const JoinString& j) {
  std::string out = j.url + "#token=" + j.token;
  if (!j.sha256.empty()) out += "&sha256=" + j.sha256;
  return out;
}

JoinString parse_join_string(const std::string& text) {
  const auto hash = text.find('#');
  STOA_CHECK(hash != std::string::npos, ErrorKind::kInvalidArgument, "join string '",
             text.substr(0, 80), "' has no '#token=...' part (expected URL#token=...&sha256=...)");
  JoinString j;
  j.url = text.substr(0, hash);
  while (!j.url.empty() && j.url.back() == '/') j.url.pop_back();
  const bool https = j.url.rfind("https://", 0) == 0;
  STOA_CHECK(https || j.url.rfind("http://", 0) == 0, ErrorKind::kInvalidArgument,
             "join string: the URL '", j.url.substr(0, 80), "' is not http(s)://host:port");
  std::string rest = text.substr(hash + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    const size_t amp = std::min(rest.find('&', pos), rest.size());
    const std::string part = rest.substr(pos, amp - pos);
    const size_t eq = part.find('=');
    STOA_CHECK(eq != std::string::npos, ErrorKind::kInvalidArgument, "join string: '",
               part.substr(0, 40), "' is not key=value");
    const std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    if (key == "token") {
      j.token = value;
    } else if (key == "sha256") {
      j.sha256 = value;
    } else {
      fail(ErrorKind::kInvalidArgument, "join string: unknown field '", key.substr(0, 40), "'");
    }
    pos = amp + 1;
  }
  STOA_CHECK(!j.token.empty(), ErrorKind::kInvalidArgument, "join string: no token");
  STOA_CHECK(!https || j.sha256.size() == 64, ErrorKind::kInvalidArgument,
             "join string: an https hub needs its certificate's sha256 (64 hex digits)");
  return j;
}

JoinString parse_join_string_or_url(const std::string& text) {
  if (text.find('#') != std::string::npos) return parse_join_string(text);
  JoinString j;
  j.url = text;
  return j;
}

}  // namespace stoa::net
