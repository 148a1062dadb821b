// The PULSE wire format (docs/pulse-format.md, byte for byte): a fixed 112-byte envelope, then a
// zstd-compressed payload. The envelope carries its own xxh3-128 and the payload's, so truncation
// and corruption are caught before decompression; the decoder then checks the payload's structure
// field by field. Two blob kinds share the envelope: a patch (version a -> b) and an anchor (the
// full int8 view at one version).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/hash.h"
#include "pulse/int8_state.h"
#include "pulse/patch.h"
#include "pulse/position_coding.h"

namespace stoa::pulse {

inline constexpr char kMagic[8] = {'S', 'T', 'O', 'A', 'P', 'U', 'L', 'S'};
// Version 2 added the f32 tensor kind (the MoE router and expert_bias, per the precision plan);
// a version-1 blob carried the router on the int8 grid, so it is refused, not reinterpreted.
inline constexpr uint16_t kFormatVersion = 2;
inline constexpr size_t kHeaderSize = 112;
// Chosen by measurement (docs/design/pulse.md): smallest after zstd on realistic sparsity.
inline constexpr PositionCoding kDefaultPositionCoding = PositionCoding::kShuffled;

enum class BlobKind : uint8_t { kPatch = 1, kAnchor = 2 };
const char* blob_kind_name(BlobKind kind);

struct BlobHeader {
  BlobKind kind = BlobKind::kPatch;
  uint64_t from_version = 0;  // anchors: equal to to_version
  uint64_t to_version = 0;
  Hash128 fingerprint;
  Hash128 state_hash;         // of the resulting state
  uint64_t payload_size = 0;  // compressed bytes after the header
  uint64_t raw_size = 0;      // payload bytes after decompression
  Hash128 payload_hash;       // xxh3-128 of the compressed payload
};

struct EncodeOptions {
  PositionCoding coding = kDefaultPositionCoding;
  int zstd_level = 1;
};

struct DecodeLimits {
  uint64_t max_raw_bytes = uint64_t{1} << 38;  // refuse payloads that claim to inflate beyond this
};

// The largest patch payload that can be valid for `state` (every element changed and coded with
// 8-byte gaps, every group re-scaled, plus the section heads): what a worker passes to
// decode_patch so that a hostile size field cannot make it allocate more than that.
DecodeLimits patch_limits_for(const Int8State& state);
// The same bound from the tensors' layouts (a receiver that holds no Int8State).
DecodeLimits patch_limits_for(const std::vector<TensorLayout>& tensors);

// Reads and checks the envelope: magic, format version, kind, header hash, that the blob is
// exactly header + payload_size bytes, and the payload hash. Throws kBadFormat / kIntegrity
// naming `what`. Cheap: lets a store or a hub index blobs without decompressing them.
BlobHeader read_header(std::span<const uint8_t> blob, const std::string& what = "pulse blob");

// The envelope checks of read_header on the first kHeaderSize bytes of a blob of `blob_size`
// bytes, all but the payload hash (a streaming reader checks that as it reads: anchor_stream.h).
BlobHeader parse_header(std::span<const uint8_t> header, uint64_t blob_size,
                        const std::string& what = "pulse blob");

std::vector<uint8_t> encode_patch(const Patch& patch, const EncodeOptions& options = {});
Patch decode_patch(std::span<const uint8_t> blob, const DecodeLimits& limits = {});

std::vector<uint8_t> encode_anchor(const Int8State& state, int zstd_level = 1);
// Rebuilds the state and checks every tensor hash, the state hash and the fingerprint.
Int8State decode_anchor(std::span<const uint8_t> blob, const DecodeLimits& limits = {});

// The envelope alone: seal_blob compresses `raw` and writes the header (sizes and hashes filled
// in); open_blob checks the envelope and returns the decompressed payload. Exposed for tools and
// for the fuzz tests, which mutate a payload and re-seal it to reach the structural decoder.
std::vector<uint8_t> seal_blob(const BlobHeader& header, std::span<const uint8_t> raw, int level);
std::vector<uint8_t> open_blob(std::span<const uint8_t> blob, BlobHeader* header,
                               const DecodeLimits& limits = {});

// The 112-byte envelope of `header` (its sizes and payload hash as given; the header hash is
// computed): for writers that stream the payload and write the envelope last (anchor_writer.h).
std::vector<uint8_t> blob_header_bytes(const BlobHeader& header);
// Appends a tensor's section head (name, kind, shape, content hash) as patches and anchors
// carry it.
void append_tensor_head(std::vector<uint8_t>* out, const std::string& name, TensorKind kind,
                        const Shape& shape, const Hash128& hash);

// The uncompressed payload of a patch (exposed for the position-coding measurements).
std::vector<uint8_t> patch_payload(const Patch& patch, PositionCoding coding);
// zstd helpers (level as given); decompression checks the exact size.
std::vector<uint8_t> zstd_compress(std::span<const uint8_t> data, int level);

}  // namespace stoa::pulse
