// Which hub `stoa status` reads and how it trusts it, from what an operator has at hand: a URL
// (with --token / --ca-cert), a join string (its URL, its pinned certificate fingerprint and its
// token — an operator-scope token from `stoa hub token add NAME --scope operator` reads the
// status of a hub off loopback), or the run directory on the hub's machine (what the hub writes
// there while it serves: hub.json's URL and join string, and the operator_token file).
#pragma once
#include <string>

namespace stoa::app {

struct StatusTarget {
  std::string hub_url;         // http(s)://host:port
  std::string operator_token;  // "" when none is known
  std::string ca_cert_path;    // HTTPS: a certificate to trust
  std::string pin_sha256;      // HTTPS: the fingerprint the hub's certificate must have
};

// `hub`: a URL or a join string (either may be empty when `run_dir` is given; not both set).
// An explicit `token` or `ca_cert` wins over what the join string or run directory says.
// kInvalidArgument for neither or both of hub and run_dir; kNotFound when the run directory has
// no hub.json (the hub is not serving: it writes the file while it does, and removes it on exit).
StatusTarget resolve_status_target(const std::string& hub, const std::string& run_dir,
                                   const std::string& token, const std::string& ca_cert);

}  // namespace stoa::app
