// A throwaway self-signed RSA certificate for 127.0.0.1, made with the openssl CLI (it ships with
// libssl): what an operator would configure as [hub] tls_cert / tls_key. Made outside Stoa on
// purpose, so the hub's TLS is tested against a certificate it did not make itself.
#pragma once
#include <cstdlib>
#include <string>

namespace stoa::test {

// Writes `cert` and `key` (PEM); false when the openssl CLI is missing or fails.
inline bool make_self_signed_cert(const std::string& cert, const std::string& key) {
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace stoa::test
