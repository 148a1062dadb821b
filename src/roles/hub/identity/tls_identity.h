// TLS by default off loopback: a hub that binds an address other machines can reach and has no
// configured certificate makes a self-signed one (EC P-256) in its run dir on first start and
// reuses it afterwards, so the fingerprint in the join string stays valid across restarts.
#pragma once
#include <string>

#include "roles/hub/http/server.h"

namespace stoa::hub {

struct TlsIdentity {
  std::string cert_path;
  std::string key_path;
  std::string sha256;  // of the certificate (DER), 64 lowercase hex digits
};

// <dir>/hub-cert.pem and <dir>/hub-key.pem (key 0600): loaded when both exist, made otherwise.
TlsIdentity ensure_self_signed_certificate(const std::string& dir, const std::string& host);
// The SHA-256 fingerprint of the certificate in a PEM file (throws kBadFormat / kIo).
std::string certificate_sha256(const std::string& cert_path);

// When options bind off loopback without a certificate: points them at the self-signed one in
// `dir`. Either way returns the certificate's fingerprint ("" for plain HTTP).
std::string default_tls(ServerOptions& options, const std::string& dir);

// The join string for workers (net/join_string.h): the server's URL (the machine's host name in
// place of a wildcard address), the join token and the certificate's fingerprint.
std::string hub_join_string(const HubServer& server, const ServerOptions& options,
                            const std::string& join_token, const std::string& sha256);

}  // namespace stoa::hub
