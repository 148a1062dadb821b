// Every way `stoa work` can fail to join or to go on, in words for a volunteer who is not an
// engineer: what happened and what to do about it. The catalogue (message -> cause -> what to
// do) is in docs/volunteer.md; tests/roles/worker/join_failure_test.cpp produces each failure
// against a real hub and checks the words.
#pragma once
#include <exception>
#include <string>

namespace stoa::worker {

enum class FailureKind {
  kMalformedJoinString,
  kHostNotFound,       // DNS
  kConnectionRefused,  // nothing listens at host:port
  kTimeout,            // no answer (connect or read)
  kTlsFailed,          // no TLS handshake (e.g. an http hub behind an https URL)
  kPinMismatch,        // the certificate is not the one the join string pins
  kTokenRefused,       // 401: unknown or revoked join token
  kQuarantined,        // 403: a rollout failed replay
  kRateLimited,        // 429, for longer than the join timeout
  kVersionMismatch,    // protocol version, or a hub without /v1/join
  kModelMismatch,      // --model is not the run's model
  kDiskFull,
  kNotEnoughMemory,
  kModelFiles,  // --model DIR unreadable
  kOther,
};

struct FailureAdvice {
  FailureKind kind = FailureKind::kOther;
  std::string what;    // what happened, one sentence
  std::string to_do;   // what the volunteer can do
  std::string detail;  // the original error text (for the operator)
};

// Classifies an exception thrown by run_worker (or parse_join_string). `hub_url` is the hub the
// worker talked to ("" if unknown): a connection failure is told apart (DNS / refused) by
// resolving its host name.
FailureAdvice advise(const std::exception& error, const std::string& hub_url);

// "stoa work: <what>\n  What to do: <to_do>\n  Details: <detail>\n".
std::string format_advice(const FailureAdvice& advice);

// The rejection reason codes of docs/protocol.md in words ("stale" -> "made with weights too
// old to be used"); an unknown code is returned as it is.
std::string rejection_in_words(const std::string& reason);

}  // namespace stoa::worker
