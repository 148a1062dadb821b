#include "pulse/format.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "core/byte_io.h"
#include "core/error.h"

namespace stoa::pulse {

const char* blob_kind_name(BlobKind kind) {
  return kind == BlobKind::kPatch ? "patch" : kind == BlobKind::kAnchor ? "anchor" : "?";
}

static void put_hash(ByteWriter& w, const Hash128& h) {
  w.u64(h.high);
  w.u64(h.low);
}
static Hash128 get_hash(ByteReader& r, const char* field) {
  Hash128 h;
  h.high = r.u64(field);
  h.low = r.u64(field);
  return h;
}

std::vector<uint8_t> zstd_compress(std::span<const uint8_t> data, int level) {
  std::vector<uint8_t> out(ZSTD_compressBound(data.size()));
  size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  STOA_CHECK(!ZSTD_isError(n), ErrorKind::kInternal,
             "zstd compression failed: ", ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

std::vector<uint8_t> blob_header_bytes(const BlobHeader& h) {
  std::vector<uint8_t> head;
  head.reserve(kHeaderSize);
  ByteWriter w(&head);
  w.bytes(kMagic, 8);
  w.u16(kFormatVersion);
  w.u8(static_cast<uint8_t>(h.kind));
  w.u8(1);  // compression: zstd
  w.u32(0);
  w.u64(h.from_version);
  w.u64(h.to_version);
  put_hash(w, h.fingerprint);
  put_hash(w, h.state_hash);
  w.u64(h.payload_size);
  w.u64(h.raw_size);
  put_hash(w, h.payload_hash);
  put_hash(w, hash_bytes(head.data(), head.size()));
  return head;
}

std::vector<uint8_t> seal_blob(const BlobHeader& header, std::span<const uint8_t> raw, int level) {
  BlobHeader h = header;
  std::vector<uint8_t> payload = zstd_compress(raw, level);
  h.payload_size = payload.size();
  h.raw_size = raw.size();
  h.payload_hash = hash_bytes(payload.data(), payload.size());
  std::vector<uint8_t> blob = blob_header_bytes(h);
  blob.insert(blob.end(), payload.begin(), payload.end());
  return blob;
}

DecodeLimits patch_limits_for(const Int8State& state) {
  std::vector<TensorLayout> layouts;
  layouts.reserve(state.size());
  for (const auto& [name, t] : state.tensors()) layouts.push_back({name, t.kind, t.shape});
  return patch_limits_for(layouts);
}

DecodeLimits patch_limits_for(const std::vector<TensorLayout>& tensors) {
  uint64_t bound = 4096;
  for (const TensorLayout& t : tensors) {
    const auto n = static_cast<uint64_t>(shape_numel(t.shape));
    const uint64_t groups = t.kind == TensorKind::kInt8 ? n / kInt8GroupSize : 0;
    bound += 128 + t.name.size() + 8 * t.shape.size();  // section head and coding headers
    bound += n * (8 + 4);                               // 8-byte gaps + an f32/bf16/int8 value
    bound += groups * (8 + 2 + kInt8GroupSize);         // group gap, scale, values
  }
  return DecodeLimits{bound};
}

BlobHeader read_header(std::span<const uint8_t> blob, const std::string& what) {
  BlobHeader h = parse_header(blob.first(std::min(blob.size(), kHeaderSize)), blob.size(), what);
  if (!(hash_bytes(blob.data() + kHeaderSize, blob.size() - kHeaderSize) == h.payload_hash))
    fail(ErrorKind::kIntegrity, what, ": payload checksum mismatch (corrupt payload)");
  return h;
}

BlobHeader parse_header(std::span<const uint8_t> blob, uint64_t blob_size,
                        const std::string& what) {
  ByteReader r(blob, what);
  if (blob_size < kHeaderSize || blob.size() < kHeaderSize)
    r.bad(cat("is ", blob_size, " bytes, shorter than the ", kHeaderSize, "-byte header"));
  if (std::memcmp(blob.data(), kMagic, 8) != 0) r.bad("does not start with the PULSE magic");
  Hash128 header_hash = hash_bytes(blob.data(), kHeaderSize - 16);
  r.take(8, "magic");
  uint16_t version = r.u16("format version");
  uint8_t kind = r.u8("kind");
  uint8_t compression = r.u8("compression");
  uint32_t reserved = r.u32("reserved");
  BlobHeader h;
  h.from_version = r.u64("from version");
  h.to_version = r.u64("to version");
  h.fingerprint = get_hash(r, "fingerprint");
  h.state_hash = get_hash(r, "state hash");
  h.payload_size = r.u64("payload size");
  h.raw_size = r.u64("raw size");
  h.payload_hash = get_hash(r, "payload hash");
  Hash128 stored = get_hash(r, "header hash");
  if (!(stored == header_hash))
    fail(ErrorKind::kIntegrity, what, ": header checksum mismatch (corrupt header)");
  if (version != kFormatVersion)
    r.bad(cat("has format version ", version, ", this build reads only version ", kFormatVersion,
              version < kFormatVersion
                  ? " (an older publisher; version 1 carried the MoE router on the int8 grid: "
                    "re-publish an anchor with this build)"
                  : " (a newer publisher: update this build)"));
  if (kind != 1 && kind != 2) r.bad(cat("has unknown kind ", int(kind)));
  h.kind = static_cast<BlobKind>(kind);
  if (compression != 1) r.bad(cat("has unknown compression ", int(compression)));
  if (reserved != 0) r.bad("has non-zero reserved bits");
  if (h.kind == BlobKind::kAnchor && h.from_version != h.to_version)
    r.bad("is an anchor whose from and to versions differ");
  if (h.kind == BlobKind::kPatch && h.to_version <= h.from_version)
    r.bad(cat("is a patch from version ", h.from_version, " to ", h.to_version));
  const uint64_t payload = blob_size - kHeaderSize;
  if (payload != h.payload_size)
    r.bad(cat("holds ", payload, " payload bytes, the header says ", h.payload_size,
              payload < h.payload_size ? " (truncated)" : ""));
  return h;
}

static std::vector<uint8_t> inflate(std::span<const uint8_t> blob, const BlobHeader& h,
                                    const DecodeLimits& limits, const std::string& what) {
  auto payload = blob.subspan(kHeaderSize);
  if (h.raw_size > limits.max_raw_bytes)
    fail(ErrorKind::kBadFormat, what, ": payload claims ", h.raw_size,
         " bytes, above the limit of ", limits.max_raw_bytes);
  unsigned long long frame = ZSTD_getFrameContentSize(payload.data(), payload.size());
  if (frame == ZSTD_CONTENTSIZE_ERROR || frame == ZSTD_CONTENTSIZE_UNKNOWN || frame != h.raw_size)
    fail(ErrorKind::kBadFormat, what, ": zstd frame does not declare the header's ", h.raw_size,
         " bytes");
  std::vector<uint8_t> raw(static_cast<size_t>(h.raw_size));
  size_t n = ZSTD_decompress(raw.data(), raw.size(), payload.data(), payload.size());
  if (ZSTD_isError(n)) fail(ErrorKind::kBadFormat, what, ": zstd: ", ZSTD_getErrorName(n));
  if (n != raw.size())
    fail(ErrorKind::kBadFormat, what, ": payload inflated to ", n, " bytes, expected ", raw.size());
  return raw;
}

std::vector<uint8_t> open_blob(std::span<const uint8_t> blob, BlobHeader* header,
                               const DecodeLimits& limits) {
  BlobHeader h = read_header(blob, "pulse blob");
  if (header) *header = h;
  return inflate(blob, h, limits, "pulse blob");
}

// ---- tensor section headers (shared by patches and anchors) ----

static void put_tensor_head(ByteWriter& w, const std::string& name, TensorKind kind,
                            const Shape& shape, const Hash128& hash) {
  w.u16(static_cast<uint16_t>(name.size()));
  w.bytes(name.data(), name.size());
  w.u8(static_cast<uint8_t>(kind));
  w.u8(static_cast<uint8_t>(shape.size()));
  for (int64_t d : shape) w.u64(static_cast<uint64_t>(d));
  put_hash(w, hash);
}

void append_tensor_head(std::vector<uint8_t>* out, const std::string& name, TensorKind kind,
                        const Shape& shape, const Hash128& hash) {
  ByteWriter w(out);
  put_tensor_head(w, name, kind, shape, hash);
}

struct TensorHead {
  std::string name;
  TensorKind kind;
  Shape shape;
  uint64_t numel;
  Hash128 hash;
};

static TensorHead get_tensor_head(ByteReader& r, const std::string* previous) {
  TensorHead t;
  uint16_t len = r.u16("tensor name length");
  if (len == 0) r.bad("has an empty tensor name");
  t.name = std::string(r.string(len, "tensor name"));
  if (previous && !(t.name > *previous))
    r.bad(cat("tensor '", t.name, "' is not sorted after '", *previous, "'"));
  uint8_t kind = r.u8("tensor kind");
  if (kind > 2) r.bad(cat("tensor '", t.name, "' has unknown kind ", int(kind)));
  t.kind = static_cast<TensorKind>(kind);
  uint8_t rank = r.u8("tensor rank");
  if (rank > 8) r.bad(cat("tensor '", t.name, "' has rank ", int(rank)));
  t.numel = 1;
  for (int i = 0; i < rank; ++i) {
    uint64_t d = r.u64("tensor dimension");
    if (d > (uint64_t{1} << 40) || (d != 0 && t.numel > (uint64_t{1} << 40) / d))
      r.bad(cat("tensor '", t.name, "' is implausibly large"));
    t.numel *= d;
    t.shape.push_back(static_cast<int64_t>(d));
  }
  if (t.kind == TensorKind::kInt8 && !int8_grid_fits(t.shape))
    r.bad(cat("int8 tensor '", t.name, "' has shape ", shape_string(t.shape),
              " which is not on the int8 grid"));
  t.hash = get_hash(r, "tensor hash");
  return t;
}

static uint64_t row_length(const Shape& shape) {
  return shape.empty() || shape.back() == 0 ? 1 : static_cast<uint64_t>(shape.back());
}

static void put_positions(ByteWriter& w, std::span<const uint64_t> positions, uint64_t cols,
                          PositionCoding coding) {
  w.u64(positions.size());
  w.u8(static_cast<uint8_t>(coding));
  std::vector<uint8_t> coded;
  encode_positions(positions, cols, coding, &coded);
  w.u64(coded.size());
  w.bytes(coded.data(), coded.size());
}

static std::vector<uint64_t> get_positions(ByteReader& r, uint64_t numel, uint64_t cols,
                                           const std::string& tensor, const char* what) {
  uint64_t count = r.u64("position count");
  uint8_t coding = r.u8("position coding");
  if (!valid_position_coding(coding))
    r.bad(cat("tensor '", tensor, "' uses unknown position coding ", int(coding)));
  uint64_t bytes = r.u64("coded position bytes");
  auto coded = r.take(bytes, "coded positions");
  return decode_positions(coded, count, numel, cols, static_cast<PositionCoding>(coding),
                          cat(r.what(), ": tensor '", tensor, "' ", what));
}

// ---- patches ----

std::vector<uint8_t> patch_payload(const Patch& patch, PositionCoding coding) {
  std::vector<uint8_t> raw;
  ByteWriter w(&raw);
  w.u32(static_cast<uint32_t>(patch.tensors.size()));
  for (const TensorPatch& t : patch.tensors) {
    put_tensor_head(w, t.name, t.kind, t.shape, t.result_hash);
    put_positions(w, t.positions, row_length(t.shape), coding);
    if (t.kind == TensorKind::kInt8) {
      w.bytes(t.i8.data(), t.i8.size());
      // Rescaled groups: indices coded like positions (a row holds cols/32 groups).
      put_positions(w, t.groups, row_length(t.shape) / kInt8GroupSize, coding);
      w.u16_array(t.group_scales.data(), t.group_scales.size());
      w.bytes(t.group_values.data(), t.group_values.size());
    } else if (t.kind == TensorKind::kBf16) {
      w.u16_array(t.bf16.data(), t.bf16.size());
    } else {
      w.u32_array(t.f32.data(), t.f32.size());
    }
  }
  return raw;
}

std::vector<uint8_t> encode_patch(const Patch& patch, const EncodeOptions& options) {
  STOA_CHECK(patch.tensors.size() <= 0xffffffffu, ErrorKind::kInvalidArgument,
             "patch has too many tensors");
  BlobHeader h;
  h.kind = BlobKind::kPatch;
  h.from_version = patch.from_version;
  h.to_version = patch.to_version;
  h.fingerprint = patch.fingerprint;
  h.state_hash = patch.result_state_hash;
  std::vector<uint8_t> raw = patch_payload(patch, options.coding);
  return seal_blob(h, raw, options.zstd_level);
}

Patch decode_patch(std::span<const uint8_t> blob, const DecodeLimits& limits) {
  BlobHeader h = read_header(blob, "pulse patch");
  std::string what = cat("pulse patch ", h.from_version, "->", h.to_version);
  if (h.kind != BlobKind::kPatch) fail(ErrorKind::kBadFormat, what, ": blob is an anchor");
  std::vector<uint8_t> raw = inflate(blob, h, limits, what);
  ByteReader r(raw, what);
  Patch p;
  p.from_version = h.from_version;
  p.to_version = h.to_version;
  p.fingerprint = h.fingerprint;
  p.result_state_hash = h.state_hash;
  uint32_t count = r.u32("tensor count");
  r.need(count, 20, "tensor sections");  // a section is at least 20 bytes
  p.tensors.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    TensorHead head = get_tensor_head(r, i ? &p.tensors.back().name : nullptr);
    TensorPatch t;
    t.name = head.name;
    t.kind = head.kind;
    t.shape = head.shape;
    t.result_hash = head.hash;
    uint64_t cols = row_length(t.shape);
    t.positions = get_positions(r, head.numel, cols, t.name, "positions");
    size_t n = t.positions.size();
    if (t.kind == TensorKind::kInt8) {
      auto v = r.take(n, "int8 values");
      t.i8.assign(reinterpret_cast<const int8_t*>(v.data()),
                  reinterpret_cast<const int8_t*>(v.data()) + n);
      t.groups = get_positions(r, head.numel / kInt8GroupSize, cols / kInt8GroupSize, t.name,
                               "rescaled groups");
      size_t g = t.groups.size();
      r.need(g, 2 + kInt8GroupSize, "rescaled groups");
      t.group_scales.resize(g);
      r.u16_array(t.group_scales.data(), g, "group scales");
      auto gv = r.take(g * kInt8GroupSize, "group values");
      t.group_values.assign(reinterpret_cast<const int8_t*>(gv.data()),
                            reinterpret_cast<const int8_t*>(gv.data()) + gv.size());
    } else if (t.kind == TensorKind::kBf16) {
      r.need(n, 2, "bf16 values");
      t.bf16.resize(n);
      r.u16_array(t.bf16.data(), n, "bf16 values");
    } else {
      r.need(n, 4, "f32 values");
      t.f32.resize(n);
      r.u32_array(t.f32.data(), n, "f32 values");
    }
    p.tensors.push_back(std::move(t));
  }
  if (!r.done()) r.bad(cat(r.remaining(), " trailing bytes after the last tensor"));
  return p;
}

// ---- anchors ----

std::vector<uint8_t> encode_anchor(const Int8State& state, int zstd_level) {
  std::vector<uint8_t> raw;
  raw.reserve(state.nbytes() + state.size() * 128 + 64);
  ByteWriter w(&raw);
  put_hash(w, state.config_hash());
  w.u32(static_cast<uint32_t>(state.size()));
  for (const auto& [name, t] : state.tensors()) {
    put_tensor_head(w, name, t.kind, t.shape, state.tensor_hash(name));
    if (t.kind == TensorKind::kInt8) {
      w.u16_array(t.q.scales.data(), t.q.scales.size());
      w.bytes(t.q.values.data(), t.q.values.size());
    } else if (t.kind == TensorKind::kBf16) {
      w.u16_array(t.bf16.data(), t.bf16.size());
    } else {
      w.u32_array(t.f32.data(), t.f32.size());
    }
  }
  BlobHeader h;
  h.kind = BlobKind::kAnchor;
  h.from_version = h.to_version = state.version();
  h.fingerprint = state.fingerprint();
  h.state_hash = state.state_hash();
  return seal_blob(h, raw, zstd_level);
}

Int8State decode_anchor(std::span<const uint8_t> blob, const DecodeLimits& limits) {
  BlobHeader h = read_header(blob, "pulse anchor");
  std::string what = cat("pulse anchor ", h.to_version);
  if (h.kind != BlobKind::kAnchor) fail(ErrorKind::kBadFormat, what, ": blob is a patch");
  std::vector<uint8_t> raw = inflate(blob, h, limits, what);
  ByteReader r(raw, what);
  Int8State state;
  state.set_version(h.to_version);
  state.set_config_hash(get_hash(r, "config hash"));
  uint32_t count = r.u32("tensor count");
  r.need(count, 20, "tensor sections");
  std::string previous;
  for (uint32_t i = 0; i < count; ++i) {
    TensorHead head = get_tensor_head(r, i ? &previous : nullptr);
    previous = head.name;
    if (head.kind == TensorKind::kInt8) {
      Int8Matrix q;
      q.rows = head.shape[0];
      q.cols = head.shape[1];
      uint64_t groups = head.numel / kInt8GroupSize;
      r.need(groups, 2 + kInt8GroupSize, "int8 tensor");
      q.scales.resize(static_cast<size_t>(groups));
      r.u16_array(q.scales.data(), groups, "scales");
      auto v = r.take(head.numel, "int8 values");
      q.values.assign(reinterpret_cast<const int8_t*>(v.data()),
                      reinterpret_cast<const int8_t*>(v.data()) + v.size());
      state.add_int8(head.name, std::move(q));
    } else if (head.kind == TensorKind::kBf16) {
      r.need(head.numel, 2, "bf16 tensor");
      std::vector<uint16_t> values(static_cast<size_t>(head.numel));
      r.u16_array(values.data(), head.numel, "bf16 values");
      state.add_bf16(head.name, head.shape, std::move(values));
    } else {
      r.need(head.numel, 4, "f32 tensor");
      std::vector<uint32_t> bits(static_cast<size_t>(head.numel));
      r.u32_array(bits.data(), head.numel, "f32 values");
      state.add_f32(head.name, head.shape, std::move(bits));
    }
    if (!(state.tensor_hash(head.name) == head.hash))
      fail(ErrorKind::kIntegrity, what, ": tensor '", head.name, "' does not match its hash");
  }
  if (!r.done()) r.bad(cat(r.remaining(), " trailing bytes after the last tensor"));
  if (!(state.fingerprint() == h.fingerprint))
    fail(ErrorKind::kIntegrity, what, ": the tensors do not match the header's model fingerprint");
  if (!(state.state_hash() == h.state_hash))
    fail(ErrorKind::kIntegrity, what, ": the state does not match the header's state hash");
  return state;
}

}  // namespace stoa::pulse
