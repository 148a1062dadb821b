// The one-line join string a hub prints for its workers: the hub's URL, a join token and, for
// HTTPS, the SHA-256 fingerprint of the hub's certificate, e.g.
//   https://10.0.0.5:8443#token=5f2c…&sha256=9a41…
// `stoa work --join STRING` connects to the URL, joins with the token and pins the fingerprint
// (HttpClientOptions::pin_sha256), so a self-signed hub needs no CA and no copied files.
#pragma once
#include <string>

namespace stoa::net {

struct JoinString {
  std::string url;     // http(s)://host:port
  std::string token;   // the join token
  std::string sha256;  // certificate fingerprint, 64 hex digits ("" for plain http)
};

std::string format_join_string(const JoinString& join);
// Throws kInvalidArgument naming what is wrong (no token, https without a fingerprint, ...).
JoinString parse_join_string(const std::string& text);
// What an operator gives a command for a hub (`stoa status --hub`, `stoa train --hub`): a join
// string (URL, token and pin, as parse_join_string) or a bare URL (token and pin empty, for the
// caller to find elsewhere).
JoinString parse_join_string_or_url(const std::string& text);

}  // namespace stoa::net
