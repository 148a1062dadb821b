// `stoa hub token add|list|revoke --run-dir DIR`: the hub's named join tokens, kept in the run's
// ledger (DIR/ledger.sqlite). A running hub sees a revocation within a second and refuses the
// sessions that joined with that token (roles/hub/identity/identity.h). Only a token's SHA-256 is
// stored: `add` prints the token once, with the join string that carries it (the serving hub's
// URL and certificate pin from DIR/hub.json) — what a volunteer pastes into `stoa work --join`.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "net/join_string.h"
#include "net/protocol.h"
#include "net/secret.h"
#include "roles/hub/ledger/ledger.h"

namespace stoa::cli {
namespace {

struct TokenOptions {
  std::string run_dir;
  std::string name;
  std::string scope = "work";
};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The join string of `token` on the hub serving from run_dir: its hub.json's join string (URL and
// pin) with the token swapped in. "" when the hub is not serving (it writes hub.json while it
// does) or hub.json holds no join string.
std::string join_string_for(const std::string& run_dir, const std::string& token) {
  std::ifstream in(std::filesystem::path(run_dir) / "hub.json");
  if (!in) return "";
  const auto info = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!info.is_object() || !info.contains("join") || !info["join"].is_string()) return "";
  net::JoinString j = net::parse_join_string(info["join"].get<std::string>());
  j.token = token;
  return net::format_join_string(j);
}

hub::Ledger open_ledger(const TokenOptions& o) {
  return hub::Ledger(o.run_dir + "/ledger.sqlite");
}

int add(const TokenOptions& o) {
  STOA_CHECK(
      o.scope == "work" || o.scope == "operator" || o.scope == "validate" || o.scope == "train",
      ErrorKind::kInvalidArgument,
      "stoa hub token add: --scope is work, operator, validate or train, not '", o.scope, "'");
  auto ledger = open_ledger(o);
  for (const auto& row : ledger.join_tokens()) {
    STOA_CHECK(row.name != o.name, ErrorKind::kInvalidArgument,
               "stoa hub token add: a token named '", o.name,
               "' exists (revoked or not); pick another name");
  }
  const std::string token = net::random_token();
  ledger.put_join_token({o.name, net::sha256_hex(token), o.scope, now_ms(), 0});
  std::printf("token %s (scope %s): %s\n", o.name.c_str(), o.scope.c_str(), token.c_str());
  const std::string join = join_string_for(o.run_dir, token);
  const char* use = o.scope == "train"      ? "stoa train --hub"
                    : o.scope == "operator" ? "stoa status --hub"
                    : o.scope == "validate" ? "its parts: stoa validate --hub --token --pin"
                                            : "stoa work --join";
  if (!join.empty()) {
    std::printf("join string (%s): %s\n", use, join.c_str());
  } else {
    // Printed once: the token cannot be shown again, so say how to make its join string.
    std::printf(
        "join string: the hub is not serving from %s (no hub.json), so its URL and certificate "
        "pin are not known here; once it serves, take the join string it prints and put this "
        "token after #token=\n",
        o.run_dir.c_str());
  }
  return 0;
}

int list(const TokenOptions& o) {
  auto ledger = open_ledger(o);
  std::printf("%-24s %-9s %-15s %s\n", "name", "scope", "created_ms", "state");
  for (const auto& row : ledger.join_tokens()) {
    std::printf("%-24s %-9s %-15lld %s\n", row.name.c_str(), row.scope.c_str(),
                static_cast<long long>(row.created_ms), row.revoked_ms ? "revoked" : "valid");
  }
  return 0;
}

int revoke(const TokenOptions& o) {
  auto ledger = open_ledger(o);
  if (!ledger.revoke_join_token(o.name, now_ms())) {
    std::fprintf(stderr, "stoa hub token revoke: no token named '%s'\n", o.name.c_str());
    return 1;
  }
  std::printf("revoked %s\n", o.name.c_str());
  return 0;
}

CommandRegistration add_reg(
    "hub token add", "Add a named join token (printed once)", [](CLI::App& app) {
      auto o = std::make_shared<TokenOptions>();
      app.add_option("name", o->name, "token name")->required();
      app.add_option("--run-dir", o->run_dir, "the run's directory")->required();
      app.add_option("--scope", o->scope, "work, operator, validate or train")
          ->capture_default_str();
      return [o] { return add(*o); };
    });
CommandRegistration list_reg(
    "hub token list", "List the join tokens (names, never tokens)", [](CLI::App& app) {
      auto o = std::make_shared<TokenOptions>();
      app.add_option("--run-dir", o->run_dir, "the run's directory")->required();
      return [o] { return list(*o); };
    });
CommandRegistration revoke_reg(
    "hub token revoke", "Revoke a join token; a running hub refuses its sessions",
    [](CLI::App& app) {
      auto o = std::make_shared<TokenOptions>();
      app.add_option("name", o->name, "token name")->required();
      app.add_option("--run-dir", o->run_dir, "the run's directory")->required();
      return [o] { return revoke(*o); };
    });

}  // namespace
}  // namespace stoa::cli
