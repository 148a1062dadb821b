#include "core/file_bytes.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace stoa {

void write_file_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = cat(path, ".tmp.", ::getpid(), ".", counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  STOA_CHECK(fd >= 0, ErrorKind::kIo, "cannot create ", tmp, ": ", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail(ErrorKind::kIo, "cannot write ", tmp, ": ", std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail(ErrorKind::kIo, "cannot flush ", tmp, ": ", std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail(ErrorKind::kIo, "cannot rename ", tmp, " to ", path, ": ", std::strerror(err));
  }
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STOA_CHECK(in, ErrorKind::kNotFound, "cannot open ", path);
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  in.seekg(0);
  std::vector<uint8_t> data(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(data.data()), size);
  STOA_CHECK(in.gcount() == size, ErrorKind::kIo, "short read from ", path);
  return data;
}

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::kNotFound, path, ": cannot open ", what);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail(ErrorKind::kIo, path, ": read failed");
  return text.str();
}

}  // namespace stoa
