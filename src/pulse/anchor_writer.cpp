#include "pulse/anchor_writer.h"

#include <unistd.h>
#include <zstd.h>

#include <cstring>
#include <filesystem>

#include "core/byte_io.h"
#include "core/error.h"

namespace stoa::pulse {

namespace {

uint64_t data_bytes(const TensorLayout& t) {
  const uint64_t n = static_cast<uint64_t>(shape_numel(t.shape));
  if (t.kind == TensorKind::kInt8) return n + 2 * (n / kInt8GroupSize);
  return t.kind == TensorKind::kBf16 ? 2 * n : 4 * n;
}

// The anchor payload's exact size: config hash, tensor count, then per tensor its head and data.
uint64_t anchor_raw_size(const std::vector<TensorLayout>& layouts) {
  uint64_t size = 16 + 4;
  std::vector<uint8_t> head;
  for (const auto& t : layouts) {
    head.clear();
    append_tensor_head(&head, t.name, t.kind, t.shape, Hash128{});
    size += head.size() + data_bytes(t);
  }
  return size;
}

}  // namespace

AnchorFileWriter::AnchorFileWriter(std::string path, uint64_t version, const Hash128& config_hash,
                                   std::vector<TensorLayout> layouts, int zstd_level)
    : path_(std::move(path)),
      version_(version),
      config_hash_(config_hash),
      layouts_(std::move(layouts)),
      payload_hasher_(std::make_unique<StateHasher>()) {
  for (size_t i = 1; i < layouts_.size(); ++i)
    STOA_CHECK(layouts_[i - 1].name < layouts_[i].name, ErrorKind::kInvalidArgument,
               "anchor writer: tensor layouts not sorted by name at '", layouts_[i].name, "'");
  file_ = std::fopen(path_.c_str(), "w+b");
  STOA_CHECK(file_ != nullptr, ErrorKind::kIo, path_, ": cannot create: ", std::strerror(errno));
  const std::vector<uint8_t> placeholder(kHeaderSize, 0);
  STOA_CHECK(std::fwrite(placeholder.data(), 1, kHeaderSize, file_) == kHeaderSize, ErrorKind::kIo,
             path_, ": write failed: ", std::strerror(errno));
  raw_size_ = anchor_raw_size(layouts_);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  STOA_CHECK(cctx != nullptr, ErrorKind::kInternal, "anchor writer: no zstd context");
  cctx_ = cctx;
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, zstd_level);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  ZSTD_CCtx_setPledgedSrcSize(cctx, raw_size_);
  out_buffer_.resize(ZSTD_CStreamOutSize());
  std::vector<uint8_t> start;
  ByteWriter w(&start);
  w.u64(config_hash_.high);
  w.u64(config_hash_.low);
  w.u32(static_cast<uint32_t>(layouts_.size()));
  compress(start.data(), start.size());
}

AnchorFileWriter::~AnchorFileWriter() {
  if (cctx_) ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
  if (file_) std::fclose(file_);
  if (!finished_) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);  // never leave a half-written anchor behind
  }
}

void AnchorFileWriter::write_out(const void* data, size_t size) {
  if (size == 0) return;
  STOA_CHECK(std::fwrite(data, 1, size, file_) == size, ErrorKind::kIo, path_,
             ": write failed: ", std::strerror(errno));
  payload_hasher_->add_bytes(data, size);
  payload_size_ += size;
}

void AnchorFileWriter::compress(const void* data, size_t size) {
  auto* cctx = static_cast<ZSTD_CCtx*>(cctx_);
  ZSTD_inBuffer in{data, size, 0};
  while (in.pos < in.size) {
    ZSTD_outBuffer out{out_buffer_.data(), out_buffer_.size(), 0};
    const size_t rc = ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_continue);
    STOA_CHECK(!ZSTD_isError(rc), ErrorKind::kInternal,
               "anchor writer: zstd: ", ZSTD_getErrorName(rc));
    write_out(out_buffer_.data(), out.pos);
  }
}

void AnchorFileWriter::add(const std::string& name, const StateTensor& t) {
  STOA_CHECK(next_ < layouts_.size() && layouts_[next_].name == name, ErrorKind::kInvalidArgument,
             "anchor writer: tensor '", name, "' out of layout order");
  const TensorLayout& layout = layouts_[next_++];
  STOA_CHECK(layout.kind == t.kind && layout.shape == t.shape, ErrorKind::kInvalidArgument,
             "anchor writer: tensor '", name, "' is ", tensor_kind_name(t.kind), " ",
             shape_string(t.shape), ", its layout says ", tensor_kind_name(layout.kind), " ",
             shape_string(layout.shape));
  const Hash128 hash = t.compute_hash();
  hashes_[name] = hash;
  std::vector<uint8_t> section;
  append_tensor_head(&section, name, t.kind, t.shape, hash);
  ByteWriter w(&section);
  if (t.kind == TensorKind::kInt8) {
    w.u16_array(t.q.scales.data(), t.q.scales.size());
    compress(section.data(), section.size());
    compress(t.q.values.data(), t.q.values.size());
    return;
  }
  if (t.kind == TensorKind::kBf16)
    w.u16_array(t.bf16.data(), t.bf16.size());
  else
    w.u32_array(t.f32.data(), t.f32.size());
  compress(section.data(), section.size());
}

WrittenAnchor AnchorFileWriter::finish() {
  STOA_CHECK(next_ == layouts_.size(), ErrorKind::kInvalidArgument,
             "anchor writer: ", layouts_.size() - next_, " tensors not added");
  auto* cctx = static_cast<ZSTD_CCtx*>(cctx_);
  ZSTD_inBuffer in{nullptr, 0, 0};
  for (;;) {
    ZSTD_outBuffer out{out_buffer_.data(), out_buffer_.size(), 0};
    const size_t left = ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end);
    STOA_CHECK(!ZSTD_isError(left), ErrorKind::kInternal,
               "anchor writer: zstd: ", ZSTD_getErrorName(left));
    write_out(out_buffer_.data(), out.pos);
    if (left == 0) break;
  }
  WrittenAnchor result;
  BlobHeader& h = result.header;
  h.kind = BlobKind::kAnchor;
  h.from_version = h.to_version = version_;
  h.fingerprint = model_fingerprint(config_hash_, layouts_);
  h.state_hash = combine_state_hash(hashes_);
  h.payload_size = payload_size_;
  h.raw_size = raw_size_;
  h.payload_hash = payload_hasher_->finish();
  const std::vector<uint8_t> head = blob_header_bytes(h);
  STOA_CHECK(std::fseek(file_, 0, SEEK_SET) == 0 &&
                 std::fwrite(head.data(), 1, head.size(), file_) == head.size() &&
                 std::fflush(file_) == 0 && ::fsync(fileno(file_)) == 0,
             ErrorKind::kIo, path_, ": write failed: ", std::strerror(errno));
  // The content address covers the envelope, which comes first but is known last: read back.
  STOA_CHECK(std::fseek(file_, 0, SEEK_SET) == 0, ErrorKind::kIo, path_, ": seek failed");
  StateHasher file_hasher;
  std::vector<uint8_t> buffer(size_t{1} << 20);
  for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), file_)) > 0;)
    file_hasher.add_bytes(buffer.data(), n);
  STOA_CHECK(!std::ferror(file_), ErrorKind::kIo, path_, ": read back failed");
  result.blob_hash = file_hasher.finish();
  result.bytes = kHeaderSize + payload_size_;
  std::fclose(file_);
  file_ = nullptr;
  finished_ = true;
  return result;
}

void adopt_into_store(const std::string& path, const std::string& store_path) {
  std::error_code ec;
  std::filesystem::rename(path, store_path, ec);
  STOA_CHECK(!ec, ErrorKind::kIo, path, ": cannot move into the blob store as ", store_path, ": ",
             ec.message());
}

}  // namespace stoa::pulse
