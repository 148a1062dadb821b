// Errors: Stoa reports every failure as stoa::Error with a kind and a message that names the
// thing at fault (the file, the rollout, the field) and what is wrong with it.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace stoa {

enum class ErrorKind {
  kInvalidArgument,  // the caller passed something malformed
  kBadFormat,        // a file or blob is malformed, truncated or corrupt
  kNotFound,         // a file, tensor, key or blob does not exist
  kIo,               // the OS refused (open, read, write, mmap, socket)
  kIntegrity,        // a hash or checksum did not match
  kUnsupported,      // valid but not implemented (an unknown architecture, dtype, ...)
  kNetwork,          // a peer is unreachable or answered wrongly
  kInternal,         // a bug: an invariant of ours did not hold
};

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// cat("a", 1, "b") -> "a1b": builds messages without a format library.
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, Args&&... args) {
  throw Error(kind, cat(std::forward<Args>(args)...));
}

// STOA_CHECK(cond, kind, message parts...): throws Error(kind, ...) when cond is false.
#define STOA_CHECK(cond, kind, ...)               \
  do {                                            \
    if (!(cond)) ::stoa::fail(kind, __VA_ARGS__); \
  } while (0)

// Result<T>: a value or an Error, for code that must not throw (e.g. verifying untrusted blobs on
// a hot path). Throwing code can call value(), which rethrows the stored error.
template <typename T>
class Result {
 public:
  Result(T value) : ok_(true), value_(std::move(value)), error_(ErrorKind::kInternal, "") {}
  Result(Error error) : ok_(false), value_(), error_(std::move(error)) {}
  bool ok() const { return ok_; }
  const Error& error() const { return error_; }
  T& value() {
    if (!ok_) throw error_;
    return value_;
  }
  const T& value() const {
    if (!ok_) throw error_;
    return value_;
  }

 private:
  bool ok_;
  T value_;
  Error error_;
};

}  // namespace stoa
