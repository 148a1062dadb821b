// Downloads that survive bad links: the body goes to a spool file on disk (never held in memory),
// and a dropped connection, a timeout or a restarted worker continue from the spool's length with
// `Range: bytes=N-` and `If-Range: <ETag>`. A server that answers 200 to a ranged request, an
// ETag that changed, or a Content-Range that does not start where the spool ends restarts that
// download from zero (the spool is truncated), so a spool never mixes two bodies. The ETag of
// the body in the spool lives beside it (`<spool>.etag`), which is what lets a worker restarted
// mid-download resume.
//
// Failures: a full disk (or any write error) throws kIo naming the spool and keeps it, so the
// download resumes once space is freed; a 4xx throws kNetwork; transport errors and 5xx/408/429
// are retried — without limit while bytes keep arriving (a link that drops every few MB still
// finishes), up to max_attempts_without_progress in a row with back-off otherwise.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "net/http_client.h"

namespace stoa::net {

struct DownloadProgress {
  uint64_t bytes = 0;      // in the spool
  uint64_t total = 0;      // 0 until the server said
  double bytes_per_s = 0;  // over this call's transfers
  double eta_s = -1;       // -1 while unknown
};

struct DownloadOptions {
  std::chrono::milliseconds read_timeout{60000};
  int max_attempts_without_progress = 6;
  std::chrono::milliseconds backoff_base{200};
  std::chrono::milliseconds backoff_max{10000};
  // Called at most every progress_interval while bytes arrive, and once at the end.
  std::function<void(const DownloadProgress&)> on_progress;
  std::chrono::milliseconds progress_interval{1000};
};

struct DownloadStats {
  uint64_t bytes = 0;              // the complete body (the spool's size)
  uint64_t bytes_transferred = 0;  // body bytes received by this call, every attempt together
  uint64_t resumed_from = 0;       // spool bytes already there when this call started
  int requests = 0;
  int resumes = 0;   // ranged requests answered 206
  int restarts = 0;  // spool discarded: 200 to a ranged request, ETag change, bad Content-Range
};

// GETs `path` into `spool_path` (created with its directory's permission; parent must exist).
DownloadStats download_to_spool(HttpClient& http, const std::string& path,
                                const std::string& spool_path, const DownloadOptions& options = {});

// Removes a spool and its ETag file (after the blob was used, or when it failed verification).
void remove_spool(const std::string& spool_path);

}  // namespace stoa::net
