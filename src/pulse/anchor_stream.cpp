#include "pulse/anchor_stream.h"

#include <sys/stat.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"

namespace stoa::pulse {
namespace {

// The payload of an anchor file as a stream of inflated bytes: every compressed byte read is fed
// to the payload hash and (with the envelope) to the content-address hash.
class PayloadStream {
 public:
  PayloadStream(std::FILE* file, const BlobHeader& header, std::string what)
      : file_(file), header_(header), what_(std::move(what)), in_(kChunk) {
    ZSTD_initDStream(stream_.get());
  }

  StateHasher& blob_hasher() { return blob_; }
  uint64_t remaining() const { return header_.raw_size - produced_; }

  void read(void* dst, uint64_t n, const char* field) {
    if (n == 0) return;
    if (produced_ + n > header_.raw_size)
      fail(ErrorKind::kBadFormat, what_, ": ", field, " runs past the payload's ", header_.raw_size,
           " inflated bytes");
    ZSTD_outBuffer out{dst, static_cast<size_t>(n), 0};
    while (out.pos < out.size) {
      if (in_pos_ == in_len_) refill(field);
      ZSTD_inBuffer in{in_.data(), in_len_, in_pos_};
      const size_t rc = ZSTD_decompressStream(stream_.get(), &out, &in);
      if (ZSTD_isError(rc)) fail(ErrorKind::kBadFormat, what_, ": zstd: ", ZSTD_getErrorName(rc));
      in_pos_ = in.pos;
      frame_done_ = rc == 0;
      if (frame_done_ && out.pos < out.size)
        fail(ErrorKind::kBadFormat, what_, ": the zstd frame ends inside ", field);
    }
    produced_ += n;
  }
  template <typename T>
  T le(const char* field) {
    T v{};
    read(&v, sizeof(T), field);  // little-endian hosts only (byte_io.h)
    return v;
  }

  // After the last field: the frame is complete, nothing is left in the file, the payload hash
  // matches.
  void finish() {
    if (produced_ != header_.raw_size)
      fail(ErrorKind::kBadFormat, what_, ": ", header_.raw_size - produced_,
           " trailing bytes after the last tensor");
    uint8_t extra = 0;
    ZSTD_outBuffer out{&extra, 1, 0};
    while (!frame_done_) {
      ZSTD_inBuffer in{in_.data(), in_len_, in_pos_};
      const size_t rc = ZSTD_decompressStream(stream_.get(), &out, &in);
      if (ZSTD_isError(rc)) fail(ErrorKind::kBadFormat, what_, ": zstd: ", ZSTD_getErrorName(rc));
      in_pos_ = in.pos;
      if (out.pos != 0)
        fail(ErrorKind::kBadFormat, what_, ": the payload inflates past the header's ",
             header_.raw_size, " bytes");
      frame_done_ = rc == 0;
      if (!frame_done_ && in_pos_ == in_len_ && !refill_or_end())
        fail(ErrorKind::kBadFormat, what_, ": the zstd frame is truncated");
    }
    if (in_pos_ != in_len_ || refill_or_end())
      fail(ErrorKind::kBadFormat, what_, ": bytes after the zstd frame");
    if (!(payload_.finish() == header_.payload_hash))
      fail(ErrorKind::kIntegrity, what_, ": payload checksum mismatch (corrupt payload)");
  }

 private:
  static constexpr size_t kChunk = size_t{1} << 20;
  struct FreeStream {
    void operator()(ZSTD_DStream* s) const { ZSTD_freeDStream(s); }
  };

  bool refill_or_end() {
    in_len_ = std::fread(in_.data(), 1, in_.size(), file_);
    in_pos_ = 0;
    if (in_len_ == 0 && std::ferror(file_))
      fail(ErrorKind::kIo, what_, ": read error: ", std::strerror(errno));
    payload_.add_bytes(in_.data(), in_len_);
    blob_.add_bytes(in_.data(), in_len_);
    return in_len_ > 0;
  }
  void refill(const char* field) {
    if (!refill_or_end())
      fail(ErrorKind::kBadFormat, what_, ": truncated inside ", field, " (the file ends)");
  }

  std::FILE* file_;
  BlobHeader header_;
  std::string what_;
  std::unique_ptr<ZSTD_DStream, FreeStream> stream_{ZSTD_createDStream()};
  std::vector<uint8_t> in_;
  size_t in_len_ = 0, in_pos_ = 0;
  uint64_t produced_ = 0;
  bool frame_done_ = false;
  StateHasher payload_, blob_;
};

Hash128 read_hash(PayloadStream& in, const char* field) {
  Hash128 h;
  h.high = in.le<uint64_t>(field);
  h.low = in.le<uint64_t>(field);
  return h;
}

// One tensor section's head, with the checks of format.cpp's get_tensor_head.
struct Head {
  std::string name;
  TensorKind kind;
  Shape shape;
  uint64_t numel = 1;
  Hash128 hash;
};

Head read_head(PayloadStream& in, const std::string& previous, bool first,
               const std::string& what) {
  Head t;
  const uint16_t len = in.le<uint16_t>("tensor name length");
  if (len == 0) fail(ErrorKind::kBadFormat, what, ": has an empty tensor name");
  t.name.resize(len);
  in.read(t.name.data(), len, "tensor name");
  if (!first && !(t.name > previous))
    fail(ErrorKind::kBadFormat, what, ": tensor '", t.name, "' is not sorted after '", previous,
         "'");
  const uint8_t kind = in.le<uint8_t>("tensor kind");
  if (kind > 2)
    fail(ErrorKind::kBadFormat, what, ": tensor '", t.name, "' has unknown kind ", int(kind));
  t.kind = static_cast<TensorKind>(kind);
  const uint8_t rank = in.le<uint8_t>("tensor rank");
  if (rank > 8) fail(ErrorKind::kBadFormat, what, ": tensor '", t.name, "' has rank ", int(rank));
  for (int i = 0; i < rank; ++i) {
    const uint64_t d = in.le<uint64_t>("tensor dimension");
    if (d > (uint64_t{1} << 40) || (d != 0 && t.numel > (uint64_t{1} << 40) / d))
      fail(ErrorKind::kBadFormat, what, ": tensor '", t.name, "' is implausibly large");
    t.numel *= d;
    t.shape.push_back(static_cast<int64_t>(d));
  }
  if (t.kind == TensorKind::kInt8 && !int8_grid_fits(t.shape))
    fail(ErrorKind::kBadFormat, what, ": int8 tensor '", t.name, "' has shape ",
         shape_string(t.shape), " which is not on the int8 grid");
  t.hash = read_hash(in, "tensor hash");
  return t;
}

StateTensor read_values(PayloadStream& in, const Head& head, const std::string& what) {
  // Checked before allocating: a hostile shape cannot claim more than the payload holds.
  const uint64_t width = head.kind == TensorKind::kInt8   ? 1
                         : head.kind == TensorKind::kBf16 ? 2
                                                          : 4;
  const uint64_t scale_bytes = head.kind == TensorKind::kInt8 ? head.numel / kInt8GroupSize * 2 : 0;
  if (head.numel * width + scale_bytes > in.remaining())
    fail(ErrorKind::kBadFormat, what, ": tensor '", head.name, "' ", shape_string(head.shape),
         " needs more bytes than the payload has left (", in.remaining(), ")");
  StateTensor t;
  t.kind = head.kind;
  t.shape = head.shape;
  if (head.kind == TensorKind::kInt8) {
    t.q.rows = head.shape[0];
    t.q.cols = head.shape[1];
    t.q.scales.resize(static_cast<size_t>(head.numel / kInt8GroupSize));
    in.read(t.q.scales.data(), t.q.scales.size() * 2, "scales");
    t.q.values.resize(static_cast<size_t>(head.numel));
    in.read(t.q.values.data(), t.q.values.size(), "int8 values");
  } else if (head.kind == TensorKind::kBf16) {
    t.bf16.resize(static_cast<size_t>(head.numel));
    in.read(t.bf16.data(), t.bf16.size() * 2, "bf16 values");
  } else {
    t.f32.resize(static_cast<size_t>(head.numel));
    in.read(t.f32.data(), t.f32.size() * 4, "f32 values");
  }
  return t;
}

class StateSink final : public AnchorSink {
 public:
  explicit StateSink(Int8State& state) : state_(state) {}
  void begin(const BlobHeader& header, const Hash128& config_hash) override {
    state_.set_version(header.to_version);
    state_.set_config_hash(config_hash);
  }
  void tensor(const std::string& name, StateTensor tensor, const Hash128& hash) override {
    state_.add_hashed(name, std::move(tensor), hash);
  }

 private:
  Int8State& state_;
};

}  // namespace

Hash128 hash_blob_file(const std::string& path, uint64_t* bytes) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  STOA_CHECK(file != nullptr, ErrorKind::kIo, path, ": cannot open: ", std::strerror(errno));
  StateHasher h;
  std::vector<uint8_t> buf(size_t{1} << 20);
  *bytes = 0;
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), file.get())) > 0; *bytes += n)
    h.add_bytes(buf.data(), n);
  STOA_CHECK(!std::ferror(file.get()), ErrorKind::kIo, path, ": read error");
  return h.finish();
}

static AnchorInfo stream_anchor(const std::string& path, const Hash128* expected_blob_hash,
                                AnchorSink& sink, const DecodeLimits& limits);

AnchorInfo stream_anchor_file(const std::string& path, const Hash128* expected_blob_hash,
                              AnchorSink& sink, const DecodeLimits& limits) {
  try {
    return stream_anchor(path, expected_blob_hash, sink, limits);
  } catch (const Error& e) {
    // A transfer that went wrong usually breaks the stream long before its end, where the
    // content address is checked: say so (a refetch can help) rather than report the symptom.
    if (!expected_blob_hash || e.kind() == ErrorKind::kIo) throw;
    uint64_t bytes = 0;
    const Hash128 got = hash_blob_file(path, &bytes);
    if (got == *expected_blob_hash) throw;
    fail(ErrorKind::kIntegrity, "pulse anchor file ", path, ": ", bytes, " bytes hashing to ",
         got.hex(), ", not to the blob's name ", expected_blob_hash->hex(), " (", e.what(), ")");
  }
}

static AnchorInfo stream_anchor(const std::string& path, const Hash128* expected_blob_hash,
                                AnchorSink& sink, const DecodeLimits& limits) {
  const std::string what = cat("pulse anchor file ", path);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  STOA_CHECK(file != nullptr, ErrorKind::kIo, what, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  STOA_CHECK(::fstat(::fileno(file.get()), &st) == 0, ErrorKind::kIo, what, ": ",
             std::strerror(errno));
  uint8_t head_bytes[kHeaderSize] = {};
  const size_t got = std::fread(head_bytes, 1, kHeaderSize, file.get());
  AnchorInfo info;
  info.blob_bytes = static_cast<uint64_t>(st.st_size);
  info.header = parse_header(std::span<const uint8_t>(head_bytes, got), info.blob_bytes, what);
  const BlobHeader& h = info.header;
  if (h.kind != BlobKind::kAnchor) fail(ErrorKind::kBadFormat, what, ": blob is a patch");
  if (h.raw_size > limits.max_raw_bytes)
    fail(ErrorKind::kBadFormat, what, ": payload claims ", h.raw_size,
         " bytes, above the limit of ", limits.max_raw_bytes);

  PayloadStream in(file.get(), h, what);
  in.blob_hasher().add_bytes(head_bytes, kHeaderSize);
  info.config_hash = read_hash(in, "config hash");
  sink.begin(h, info.config_hash);
  const uint32_t count = in.le<uint32_t>("tensor count");
  if (uint64_t{count} * 20 > h.raw_size)
    fail(ErrorKind::kBadFormat, what, ": claims ", count, " tensors in ", h.raw_size, " bytes");
  std::vector<TensorLayout> layouts;
  layouts.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    Head head = read_head(in, i ? layouts.back().name : std::string(), i == 0, what);
    StateTensor t = read_values(in, head, what);
    const Hash128 hash = t.compute_hash();
    if (!(hash == head.hash))
      fail(ErrorKind::kIntegrity, what, ": tensor '", head.name, "' does not match its hash");
    layouts.push_back({head.name, head.kind, head.shape});
    info.tensor_hashes.emplace(head.name, hash);
    sink.tensor(head.name, std::move(t), hash);
  }
  in.finish();
  if (expected_blob_hash && !(in.blob_hasher().finish() == *expected_blob_hash))
    fail(ErrorKind::kIntegrity, what, ": ", info.blob_bytes, " bytes hashing to ",
         in.blob_hasher().finish().hex(), ", not to the blob's name ", expected_blob_hash->hex());
  if (!(model_fingerprint(info.config_hash, layouts) == h.fingerprint))
    fail(ErrorKind::kIntegrity, what, ": the tensors do not match the header's model fingerprint");
  if (!(combine_state_hash(info.tensor_hashes) == h.state_hash))
    fail(ErrorKind::kIntegrity, what, ": the state does not match the header's state hash");
  return info;
}

Int8State decode_anchor_file(const std::string& path, const Hash128* expected_blob_hash,
                             const DecodeLimits& limits) {
  Int8State state;
  StateSink sink(state);
  stream_anchor_file(path, expected_blob_hash, sink, limits);
  return state;
}

}  // namespace stoa::pulse
