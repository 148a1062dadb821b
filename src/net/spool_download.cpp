#include "net/spool_download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/rng.h"

namespace stoa::net {
namespace {

using Clock = std::chrono::steady_clock;

std::string etag_path(const std::string& spool) {
  return spool + ".etag";
}

std::string read_etag(const std::string& spool) {
  std::ifstream in(etag_path(spool));
  std::string etag;
  std::getline(in, etag);
  return etag;
}

// Temp file + rename: a crash never leaves half an ETag next to a spool.
void write_etag(const std::string& spool, const std::string& etag) {
  if (etag.empty()) {
    std::remove(etag_path(spool).c_str());
    return;
  }
  const std::string tmp = etag_path(spool) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << etag << "\n";
    STOA_CHECK(out.good(), ErrorKind::kIo, "spool ", spool, ": cannot write its ETag file ", tmp);
  }
  STOA_CHECK(std::rename(tmp.c_str(), etag_path(spool).c_str()) == 0, ErrorKind::kIo, "spool ",
             spool, ": cannot rename ", tmp, ": ", std::strerror(errno));
}

// "bytes A-B/T" (or "bytes */T" with a 416): A and T, -1 where absent or malformed.
void parse_content_range(const std::string& v, int64_t* first, int64_t* total) {
  *first = *total = -1;
  if (v.rfind("bytes ", 0) != 0) return;
  const size_t slash = v.find('/');
  if (slash == std::string::npos) return;
  long long a = -1, t = -1;
  if (v[6] != '*' && std::sscanf(v.c_str() + 6, "%lld-", &a) != 1) return;
  if (std::sscanf(v.c_str() + slash + 1, "%lld", &t) == 1) *total = t;
  *first = a;
}

class Spool {
 public:
  explicit Spool(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    STOA_CHECK(fd_ >= 0, ErrorKind::kIo, "spool ", path, ": cannot open: ", std::strerror(errno));
    struct stat st {};
    STOA_CHECK(::fstat(fd_, &st) == 0, ErrorKind::kIo, "spool ", path, ": ", std::strerror(errno));
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~Spool() { ::close(fd_); }
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  uint64_t size() const { return size_; }
  void truncate() {
    if (size_ == 0) return;
    STOA_CHECK(::ftruncate(fd_, 0) == 0, ErrorKind::kIo, "spool ", path_,
               ": cannot truncate: ", std::strerror(errno));
    size_ = 0;
  }
  // False on a write error (errno kept in error()); what was written stays.
  bool append(const char* data, size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd_, data, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error_ = w < 0 ? errno : ENOSPC;
        return false;
      }
      data += w;
      n -= static_cast<size_t>(w);
      size_ += static_cast<uint64_t>(w);
    }
    return true;
  }
  int error() const { return error_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  int error_ = 0;
};

}  // namespace

void remove_spool(const std::string& spool_path) {
  std::remove(spool_path.c_str());
  std::remove(etag_path(spool_path).c_str());
}

DownloadStats download_to_spool(HttpClient& http, const std::string& path,
                                const std::string& spool_path, const DownloadOptions& options) {
  Spool spool(spool_path);
  std::string etag = read_etag(spool_path);
  DownloadStats stats;
  stats.resumed_from = spool.size();
  uint64_t total = 0;
  const Clock::time_point started = Clock::now();
  Clock::time_point last_report = started - options.progress_interval;
  // Jitter differs between machines (from the OS), so a hub restart does not bring every
  // worker back in the same millisecond.
  Rng jitter(os_entropy(), 0);
  int idle_attempts = 0;

  auto report = [&](bool force) {
    if (!options.on_progress) return;
    const Clock::time_point now = Clock::now();
    if (!force && now - last_report < options.progress_interval) return;
    last_report = now;
    DownloadProgress p;
    p.bytes = spool.size();
    p.total = total;
    const double seconds = std::chrono::duration<double>(now - started).count();
    p.bytes_per_s = seconds > 0 ? static_cast<double>(stats.bytes_transferred) / seconds : 0;
    if (total >= p.bytes && p.bytes_per_s > 0)
      p.eta_s = static_cast<double>(total - p.bytes) / p.bytes_per_s;
    options.on_progress(p);
  };

  for (;;) {
    STOA_CHECK(!http.cancelled(), ErrorKind::kNetwork, "GET ", path, ": cancelled");
    // Without the body's ETag a partial spool cannot be validated: start it over.
    if (spool.size() > 0 && etag.empty()) {
      spool.truncate();
      ++stats.restarts;
    }
    const uint64_t offset = spool.size();
    std::vector<std::pair<std::string, std::string>> headers;
    if (offset > 0) {
      headers.emplace_back("Range", cat("bytes=", offset, "-"));
      headers.emplace_back("If-Range", etag);
    }
    enum class Mode { kAppend, kComplete, kRestart, kError } mode = Mode::kError;
    int status = 0;
    std::string error_body;
    bool write_failed = false;
    const uint64_t transferred_before = stats.bytes_transferred;
    ++stats.requests;

    auto on_response = [&](int s, const HttpClient::HeaderLookup& header) {
      status = s;
      const std::string got_etag = header("ETag");
      if (s == 206) {
        int64_t first = -1, length = -1;
        parse_content_range(header("Content-Range"), &first, &length);
        if (offset == 0 || first != static_cast<int64_t>(offset) || length <= 0 ||
            (!got_etag.empty() && got_etag != etag)) {
          mode = Mode::kRestart;  // not the continuation of what the spool holds
          return false;
        }
        total = static_cast<uint64_t>(length);
        ++stats.resumes;
        mode = Mode::kAppend;
        return true;
      }
      if (s == 200) {
        if (offset > 0) ++stats.restarts;  // If-Range said the body changed (or no Range support)
        spool.truncate();
        etag = got_etag;
        write_etag(spool_path, etag);
        const std::string length = header("Content-Length");
        total = length.empty() ? 0 : std::strtoull(length.c_str(), nullptr, 10);
        mode = Mode::kAppend;
        return true;
      }
      if (s == 416 && offset > 0) {
        // Nothing after the spool's end: complete if the server's length is the spool's.
        int64_t first = -1, length = -1;
        parse_content_range(header("Content-Range"), &first, &length);
        mode = length == static_cast<int64_t>(offset) ? Mode::kComplete : Mode::kRestart;
        if (mode == Mode::kComplete) total = offset;
        return false;
      }
      mode = Mode::kError;
      return true;
    };
    auto on_body = [&](const char* data, size_t n) {
      if (mode != Mode::kAppend) {
        if (error_body.size() < 500) error_body.append(data, std::min<size_t>(n, 500));
        return true;
      }
      stats.bytes_transferred += n;
      if (!spool.append(data, n)) {
        write_failed = true;
        return false;
      }
      report(false);
      return true;
    };
    const std::string transport_error =
        http.get_stream(path, headers, on_response, on_body, options.read_timeout);

    if (write_failed)
      fail(ErrorKind::kIo, "spool ", spool_path, ": ",
           spool.error() == ENOSPC ? "disk full" : std::strerror(spool.error()), " after ",
           spool.size(), " of ", total, " bytes of ", path,
           " (the spool is kept: the download resumes once space is freed)");
    if (mode == Mode::kComplete || (mode == Mode::kAppend && transport_error.empty() &&
                                    (total == 0 || spool.size() == total))) {
      stats.bytes = spool.size();
      report(true);
      return stats;
    }
    if (mode == Mode::kRestart) {
      spool.truncate();
      etag.clear();
      write_etag(spool_path, etag);
      ++stats.restarts;
      continue;  // a fresh GET at once: the server answered, it just answered another body
    }
    const bool retryable_status = status >= 500 || status == 408 || status == 429;
    if (mode == Mode::kError && status != 0 && !retryable_status)
      fail(ErrorKind::kNetwork, "GET ", http.base_url(), path, ": HTTP ", status, ": ",
           error_body.substr(0, 300));
    // A cut or a server hiccup: resume. Progress resets the count, so a link that drops every
    // few MB still gets the whole body; a link that delivers nothing gives up eventually.
    if (stats.bytes_transferred > transferred_before) {
      idle_attempts = 0;
      continue;
    }
    STOA_CHECK(++idle_attempts < options.max_attempts_without_progress, ErrorKind::kNetwork, "GET ",
               path, ": no progress after ", idle_attempts, " attempts (",
               transport_error.empty() ? cat("HTTP ", status) : transport_error, "); ",
               spool.size(), " bytes kept in ", spool_path);
    const int64_t cap = std::min<int64_t>(
        options.backoff_max.count(), options.backoff_base.count() << std::min(idle_attempts, 16));
    const auto wait = std::chrono::milliseconds(jitter.range(0, std::max<int64_t>(cap, 0)));
    for (auto until = Clock::now() + wait; Clock::now() < until && !http.cancelled();)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace stoa::net
