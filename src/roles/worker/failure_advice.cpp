#include "roles/worker/failure_advice.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cctype>
#include <map>

#include "core/error.h"
#include "net/hub_client.h"

namespace stoa::worker {
namespace {

bool has(const std::string& text, const char* needle) {
  return text.find(needle) != std::string::npos;
}

// "https://host:port" -> "host" (brackets of an IPv6 literal removed).
std::string url_host(const std::string& url) {
  std::string rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
  rest = rest.substr(0, rest.find('/'));
  if (!rest.empty() && rest.front() == '[') return rest.substr(1, rest.find(']') - 1);
  return rest.substr(0, rest.rfind(':') == std::string::npos ? rest.size() : rest.rfind(':'));
}

std::string url_host_port(const std::string& url) {
  std::string rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
  return rest.substr(0, rest.find('/'));
}

bool host_resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found) freeaddrinfo(found);
  return rc == 0;
}

FailureAdvice make(FailureKind kind, std::string what, std::string to_do) {
  return {kind, std::move(what), std::move(to_do), {}};
}

constexpr const char* kAskOperator = "ask the operator of the run for a new join string";

}  // namespace

FailureAdvice advise(const std::exception& error, const std::string& hub_url) {
  const std::string text = error.what();
  const auto* stoa_error = dynamic_cast<const Error*>(&error);
  const auto* refused = dynamic_cast<const net::JoinRefused*>(&error);
  const int status = refused ? refused->status() : 0;
  const std::string where = hub_url.empty() ? "the hub" : "the hub at " + url_host_port(hub_url);
  FailureAdvice a;
  if (text.rfind("join string", 0) == 0 || text.rfind("certificate pin '", 0) == 0) {
    a = make(FailureKind::kMalformedJoinString, "The join string is not valid.",
             "copy the whole join string the operator gave you, on one line and in single "
             "quotes ('https://...#token=...&sha256=...': the # and & must not reach the shell "
             "unquoted); if it is whole, " +
                 std::string(kAskOperator));
  } else if (has(text, "TLS certificate pin mismatch")) {
    a = make(FailureKind::kPinMismatch,
             where +
                 " showed a different TLS certificate than the one the join string names. "
                 "Either someone between you and the hub is intercepting the connection, or "
                 "the hub made itself a new certificate. Nothing was sent to it.",
             std::string(kAskOperator) +
                 " and compare its sha256= with the old one; do not use this network for the "
                 "worker until the operator confirms the certificate changed");
  } else if (has(text, "quarantined")) {
    a = make(FailureKind::kQuarantined,
             where +
                 " has quarantined this worker: a rollout it sent did not reproduce when "
                 "the hub replayed it, so its work is no longer used.",
             "tell the operator (give them the worker id in the details below); a faulty "
             "memory module or an overclocked CPU can cause this, so a memory test is worth "
             "running before joining again");
  } else if (status == 401 || (status == 0 && has(text, "revoked"))) {
    a = make(FailureKind::kTokenRefused,
             where +
                 " does not accept the join token of this join string (it is unknown, or "
                 "the operator revoked it).",
             kAskOperator);
  } else if (status == 429 || has(text, "HTTP 429")) {
    a = make(FailureKind::kRateLimited,
             where + " kept asking this worker to wait (too many joins from your address).",
             "wait a few minutes and start again; if other workers on your network join the "
             "same hub, start them one at a time");
  } else if (has(text, "protocol version") || status == 404) {
    a = make(FailureKind::kVersionMismatch,
             status == 404 ? where +
                                 " answered, but not as a Stoa hub of this version (no "
                                 "/v1/join)."
                           : "This worker and " + where + " speak different protocol versions.",
             "install the stoa-worker package of the same release as the hub (ask the operator "
             "which), and check that the join string's address is the hub's");
  } else if (has(text, "hub's vocabulary has") || has(text, "is for another model") ||
             has(text, "differs from this worker's rendering")) {
    a = make(FailureKind::kModelMismatch,
             "The model files given with --model are not the model this run trains.",
             "get the run's config.json and tokenizer.json from the operator (or from the run "
             "directory) and pass that directory with --model");
  } else if (has(text, "not enough memory for the model")) {
    a = make(FailureKind::kNotEnoughMemory,
             "This machine does not have enough free memory for the run's model (figures "
             "below); nothing was downloaded.",
             "close other programs and start again, or join a run with a smaller model; "
             "--max-memory lowers the limit, it cannot raise it");
  } else if (has(text, "disk full") || has(text, "not enough disk space")) {
    a = make(FailureKind::kDiskFull,
             "The disk holding the worker's state directory is full (figures below).",
             "free some space (what was downloaded is kept and the download resumes), or start "
             "the worker with --state-dir on a disk with room");
  } else if (has(text, ": SSLConnection") || has(text, ": SSLServerVerification")) {
    a = make(FailureKind::kTlsFailed,
             "No secure (TLS) connection could be set up with " + where + ".",
             "check that the join string is the one the hub printed (an https:// address for a "
             "hub that serves plain http fails this way); else " +
                 std::string(kAskOperator));
  } else if (has(text, ": ConnectionTimeout") || has(text, ": Read (")) {
    a = make(FailureKind::kTimeout,
             where +
                 " did not answer in time: the machine is off or overloaded, or a firewall "
                 "silently drops the connection.",
             "check your internet connection and try again later; if it persists, tell the "
             "operator that " +
                 url_host_port(hub_url) + " does not answer from your network");
  } else if (has(text, ": Connection (") && !hub_url.empty() && !host_resolves(url_host(hub_url))) {
    a = make(FailureKind::kHostNotFound,
             "The hub's address '" + url_host(hub_url) + "' could not be found (DNS).",
             "check your internet connection and the spelling of the join string's address; "
             "if it is right, the name may not be published yet: ask the operator");
  } else if (has(text, ": Connection (")) {
    a = make(FailureKind::kConnectionRefused,
             "Nothing answers at " + url_host_port(hub_url) +
                 ": the hub is not running, or a firewall or router blocks its port.",
             "check that the run is up (ask the operator), then that your network lets "
             "outgoing connections to that port through; the worker retried for --join-timeout "
             "seconds before giving up");
  } else if (has(text, "config.json") || has(text, "tokenizer.json")) {
    a = make(FailureKind::kModelFiles, "The model directory given with --model is not usable.",
             "pass the directory holding the run's config.json and tokenizer.json (the "
             "operator has them)");
  } else {
    a = make(FailureKind::kOther,
             stoa_error ? "The worker stopped on an error." : "The worker stopped unexpectedly.",
             "start it again; if it happens again, send the operator the details below (and "
             "the output of `stoa work --verbose`)");
  }
  a.detail = text;
  return a;
}

std::string format_advice(const FailureAdvice& a) {
  std::string what = a.what;  // "the hub at ..." opens the sentence: "The hub at ..."
  if (!what.empty()) what[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(what[0])));
  return "stoa work: " + what + "\n  What to do: " + a.to_do + ".\n  Details: " + a.detail + "\n";
}

std::string rejection_in_words(const std::string& reason) {
  static const std::map<std::string, std::string> words = {
      {"stale", "made with weights too old to be used"},
      {"group_full", "its group already had enough rollouts"},
      {"group_closed", "its group was already trained or dropped"},
      {"unknown_lease", "its lease had expired"},
      {"lease_worker_mismatch", "the lease belongs to another worker"},
      {"lease_mismatch", "it does not match its lease"},
      {"prompt_mismatch", "its prompt differs from the lease's"},
      {"too_long", "it is longer than the run allows"},
      {"too_short", "it has fewer than two tokens"},
      {"bad_shape", "its flags or probabilities do not match its tokens"},
      {"first_token_generated", "its first token is marked as generated"},
      {"topk_mismatch", "its top-K report is not the size the run asks for"},
      {"no_generated_tokens", "it has no generated tokens"},
      {"bad_token_id", "it holds a token the model does not have"},
      {"bad_logprob", "it holds an invalid probability"},
      {"unknown_version", "it names weights the hub never published"},
      {"bad_topk", "its top-K rows are malformed"},
      {"bad_seed", "its sampling seed is not the lease's"},
      {"rollout_id_taken", "its id was used by another worker"},
      {"quarantined", "this worker is quarantined"},
      {"lease_revoked",
       "its lease was taken back: nothing was submitted on it for too long, so its group went to "
       "another worker"},
  };
  const auto it = words.find(reason);
  return it == words.end() ? reason : it->second;
}

}  // namespace stoa::worker
