#include "app/status/status_target.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_bytes.h"
#include "net/join_string.h"

namespace stoa::app {
namespace {

// A hub bound to every interface is reached from its own machine on loopback.
std::string local_url(std::string url) {
  for (const char* any : {"://0.0.0.0:", "://[::]:", "://:::"}) {
    const size_t at = url.find(any);
    if (at != std::string::npos) url.replace(at, std::string(any).size(), "://127.0.0.1:");
  }
  return url;
}

StatusTarget from_run_dir(const std::string& run_dir) {
  namespace fs = std::filesystem;
  const fs::path hub_json = fs::path(run_dir) / "hub.json";
  if (!fs::exists(hub_json)) {
    std::string port;
    std::ifstream(fs::path(run_dir) / "hub_port") >> port;
    fail(ErrorKind::kNotFound, "stoa status: no hub serving from ", run_dir, " (no ",
         hub_json.string(), ", which the hub writes while it serves",
         port.empty() ? std::string(")") : ", last on port " + port + ")");
  }
  const auto info = nlohmann::json::parse(read_text_file(hub_json.string(), "hub.json"), nullptr,
                                          /*allow_exceptions=*/false);
  STOA_CHECK(info.is_object() && info.contains("url") && info["url"].is_string(),
             ErrorKind::kBadFormat, "stoa status: ", hub_json.string(), " names no url");
  StatusTarget t;
  t.hub_url = local_url(info["url"].get<std::string>());
  if (info.contains("join") && info["join"].is_string())
    t.pin_sha256 = net::parse_join_string(info["join"].get<std::string>()).sha256;
  // Made by the hub at first start when run.toml sets no operator_token (hub_config.h).
  std::ifstream(fs::path(run_dir) / "operator_token") >> t.operator_token;
  return t;
}

}  // namespace

StatusTarget resolve_status_target(const std::string& hub, const std::string& run_dir,
                                   const std::string& token, const std::string& ca_cert) {
  STOA_CHECK(hub.empty() != run_dir.empty(), ErrorKind::kInvalidArgument,
             "stoa status: give --hub (a URL or a join string) or --run-dir, one of them");
  StatusTarget t;
  if (!run_dir.empty()) {
    t = from_run_dir(run_dir);
  } else {
    const net::JoinString j = net::parse_join_string_or_url(hub);
    t.hub_url = j.url;
    t.operator_token = j.token;
    t.pin_sha256 = j.sha256;
  }
  if (!token.empty()) t.operator_token = token;
  // A CA file the operator names is what they mean to trust, in place of the pin.
  if (!ca_cert.empty()) {
    t.ca_cert_path = ca_cert;
    t.pin_sha256.clear();
  }
  return t;
}

}  // namespace stoa::app
