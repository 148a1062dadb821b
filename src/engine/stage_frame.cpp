#include "engine/stage_frame.h"

#include <bit>

#include "core/byte_io.h"
#include "core/enum_names.h"
#include "core/error.h"
#include "core/hash.h"

namespace stoa::engine {
namespace {

constexpr uint32_t kMagic = 0x31475453;  // "STG1" little-endian
constexpr size_t kEnvelope = 4 + 1 + 8;  // magic, kind, checksum
// A pass input's fixed part (seq, position, logits, token count) and a request's.
constexpr int64_t kInputBytes = 8 + 8 + 1 + 4;
constexpr int64_t kRequestBytes = 4 + 8 + 8 + 8 + 8 + 8 + 8;

constexpr EnumName<StageFrameKind> kStageFrameKindNames[] = {
    {StageFrameKind::kOpen, "open"},       {StageFrameKind::kFork, "fork"},
    {StageFrameKind::kClose, "close"},     {StageFrameKind::kReserve, "reserve"},
    {StageFrameKind::kPass, "pass"},       {StageFrameKind::kSampled, "sampled"},
    {StageFrameKind::kDone, "done"},       {StageFrameKind::kError, "error"},
    {StageFrameKind::kWeights, "weights"}, {StageFrameKind::kCommit, "commit"},
};
// A commitment on the wire: stage, end layer, rows, draws, then in, out and the signature.
constexpr size_t kCommitmentBytes = 4 + 8 + 8 + 8 + 2 * 32 + 64;
constexpr uint32_t kMaxChain = 64;

uint64_t checksum(std::span<const uint8_t> bytes) {
  return hash_bytes(bytes.data(), bytes.size()).low;
}

std::vector<uint8_t> begin_frame(StageFrameKind kind) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.u32(kMagic);
  w.u8(static_cast<uint8_t>(kind));
  return out;
}

std::vector<uint8_t> end_frame(std::vector<uint8_t> out) {
  const uint64_t sum = checksum(out);
  ByteWriter(&out).u64(sum);
  return out;
}

void put_f64(ByteWriter& w, double v) {
  w.u64(std::bit_cast<uint64_t>(v));
}
double get_f64(ByteReader& r, const char* field) {
  return std::bit_cast<double>(r.u64(field));
}

// A reader over the body of an intact frame of `kind`.
ByteReader body_of(std::span<const uint8_t> frame, StageFrameKind kind) {
  const StageFrameKind got = stage_frame_kind(frame);
  STOA_CHECK(got == kind, ErrorKind::kBadFormat, "stage frame is ", stage_frame_kind_name(got),
             ", expected ", stage_frame_kind_name(kind));
  return ByteReader(frame.subspan(5, frame.size() - kEnvelope),
                    cat("stage ", stage_frame_kind_name(kind), " frame"));
}

void expect_done(const ByteReader& r) {
  if (!r.done()) r.bad(cat(r.remaining(), " bytes after the last field"));
}

}  // namespace

const char* stage_frame_kind_name(StageFrameKind kind) {
  return enum_name(kStageFrameKindNames, kind, "unknown");
}

std::vector<uint8_t> encode_stage_control(const StageControl& c) {
  STOA_CHECK(c.kind == StageFrameKind::kOpen || c.kind == StageFrameKind::kFork ||
                 c.kind == StageFrameKind::kClose || c.kind == StageFrameKind::kReserve,
             ErrorKind::kInvalidArgument, "a ", stage_frame_kind_name(c.kind),
             " frame is not a control frame");
  std::vector<uint8_t> out = begin_frame(c.kind);
  ByteWriter w(&out);
  w.u64(c.seq);
  w.u64(c.source);
  w.u64(static_cast<uint64_t>(c.capacity));
  return end_frame(std::move(out));
}

std::vector<uint8_t> encode_stage_pass(const StagePass& p) {
  int64_t tokens = 0;
  for (const StagePassInput& in : p.inputs) tokens += static_cast<int64_t>(in.tokens.size());
  STOA_CHECK(static_cast<int64_t>(p.rows.size()) == tokens * p.hidden, ErrorKind::kInvalidArgument,
             "pass frame with ", tokens, " tokens of width ", p.hidden, " carries ", p.rows.size(),
             " values");
  std::vector<uint8_t> out = begin_frame(StageFrameKind::kPass);
  out.reserve(
      static_cast<size_t>(stage_pass_bytes(tokens, static_cast<int64_t>(p.inputs.size()),
                                           static_cast<int64_t>(p.requests.size()), p.hidden)));
  ByteWriter w(&out);
  w.u64(p.pass);
  w.u32(static_cast<uint32_t>(p.inputs.size()));
  for (const StagePassInput& in : p.inputs) {
    w.u64(in.seq);
    w.u64(static_cast<uint64_t>(in.position));
    w.u8(static_cast<uint8_t>(in.logits));
    w.u32(static_cast<uint32_t>(in.tokens.size()));
    w.u32_array(reinterpret_cast<const uint32_t*>(in.tokens.data()), in.tokens.size());
  }
  w.u32(static_cast<uint32_t>(p.requests.size()));
  for (const SampleRequest& r : p.requests) {
    w.u32(static_cast<uint32_t>(r.input));
    put_f64(w, r.params.temperature);
    w.u64(static_cast<uint64_t>(r.params.top_k));
    put_f64(w, r.params.top_p);
    w.u64(static_cast<uint64_t>(r.params.top_logprobs));
    put_f64(w, r.uniform);
    w.u64(static_cast<uint64_t>(r.vocab));
  }
  w.u32(static_cast<uint32_t>(p.hidden));
  w.u32_array(reinterpret_cast<const uint32_t*>(p.rows.data()), p.rows.size());
  return end_frame(std::move(out));
}

std::vector<uint8_t> encode_stage_sampled(const StageSampled& s) {
  std::vector<uint8_t> out = begin_frame(StageFrameKind::kSampled);
  ByteWriter w(&out);
  w.u64(s.pass);
  w.u32(static_cast<uint32_t>(s.tokens.size()));
  for (const SampledToken& t : s.tokens) {
    w.u32(static_cast<uint32_t>(t.token));
    w.u32(std::bit_cast<uint32_t>(t.logprob));
    w.u32(static_cast<uint32_t>(t.top.size()));
    for (const TokenLogprob& top : t.top) {
      w.u32(static_cast<uint32_t>(top.token));
      w.u32(std::bit_cast<uint32_t>(top.logprob));
    }
  }
  return end_frame(std::move(out));
}

std::vector<uint8_t> encode_stage_done() {
  return end_frame(begin_frame(StageFrameKind::kDone));
}

std::vector<uint8_t> encode_stage_error(const std::string& message) {
  std::vector<uint8_t> out = begin_frame(StageFrameKind::kError);
  ByteWriter w(&out);
  w.u32(static_cast<uint32_t>(message.size()));
  w.bytes(message.data(), message.size());
  return end_frame(std::move(out));
}

StageFrameKind stage_frame_kind(std::span<const uint8_t> frame) {
  ByteReader r(frame, "stage frame");
  if (frame.size() < kEnvelope) r.bad(cat("a frame has at least ", kEnvelope, " bytes"));
  const uint32_t magic = r.u32("magic");
  if (magic != kMagic) r.bad("not a stage frame (bad magic)");
  const uint8_t kind = r.u8("kind");
  if (kind < static_cast<uint8_t>(StageFrameKind::kOpen) ||
      kind > static_cast<uint8_t>(StageFrameKind::kCommit))
    r.bad(cat("unknown frame kind ", static_cast<int>(kind)));
  const size_t body_end = frame.size() - 8;
  ByteReader tail(frame.subspan(body_end), "stage frame");
  const uint64_t sum = tail.u64("checksum");
  STOA_CHECK(sum == checksum(frame.first(body_end)), ErrorKind::kIntegrity, "stage ",
             stage_frame_kind_name(static_cast<StageFrameKind>(kind)), " frame of ", frame.size(),
             " bytes fails its checksum (torn or corrupt link)");
  return static_cast<StageFrameKind>(kind);
}

StageControl decode_stage_control(std::span<const uint8_t> frame) {
  const StageFrameKind kind = stage_frame_kind(frame);
  STOA_CHECK(kind == StageFrameKind::kOpen || kind == StageFrameKind::kFork ||
                 kind == StageFrameKind::kClose || kind == StageFrameKind::kReserve,
             ErrorKind::kBadFormat, "stage frame is ", stage_frame_kind_name(kind),
             ", expected a control frame");
  ByteReader r = body_of(frame, kind);
  StageControl c;
  c.kind = kind;
  c.seq = r.u64("seq");
  c.source = r.u64("source");
  c.capacity = static_cast<int64_t>(r.u64("capacity"));
  expect_done(r);
  return c;
}

StagePass decode_stage_pass(std::span<const uint8_t> frame) {
  ByteReader r = body_of(frame, StageFrameKind::kPass);
  StagePass p;
  p.pass = r.u64("pass");
  const uint32_t inputs = r.u32("input count");
  r.need(inputs, kInputBytes, "inputs");
  p.inputs.resize(inputs);
  int64_t tokens = 0;
  for (StagePassInput& in : p.inputs) {
    in.seq = r.u64("seq");
    in.position = static_cast<int64_t>(r.u64("position"));
    const uint8_t logits = r.u8("logits");
    if (logits > static_cast<uint8_t>(Logits::kAll)) r.bad(cat("logits mode ", int{logits}));
    in.logits = static_cast<Logits>(logits);
    const uint32_t n = r.u32("token count");
    r.need(n, 4, "tokens");  // before the allocation: the count is the sender's to choose
    in.tokens.resize(n);
    r.u32_array(reinterpret_cast<uint32_t*>(in.tokens.data()), n, "tokens");
    tokens += n;
  }
  const uint32_t requests = r.u32("request count");
  r.need(requests, kRequestBytes, "requests");
  p.requests.resize(requests);
  for (SampleRequest& q : p.requests) {
    q.input = r.u32("request input");
    if (q.input >= inputs) r.bad(cat("request for input ", q.input, " of ", inputs));
    q.params.temperature = get_f64(r, "temperature");
    q.params.top_k = static_cast<int64_t>(r.u64("top_k"));
    q.params.top_p = get_f64(r, "top_p");
    q.params.top_logprobs = static_cast<int64_t>(r.u64("top_logprobs"));
    q.uniform = get_f64(r, "uniform");
    q.vocab = static_cast<int64_t>(r.u64("vocab"));
  }
  p.hidden = r.u32("hidden");
  if (p.hidden <= 0) r.bad("hidden width 0");
  const auto values = static_cast<uint64_t>(tokens) * static_cast<uint64_t>(p.hidden);
  r.need(values, 4, "hidden rows");
  p.rows.resize(values);
  r.u32_array(reinterpret_cast<uint32_t*>(p.rows.data()), values, "hidden rows");
  expect_done(r);
  return p;
}

StageSampled decode_stage_sampled(std::span<const uint8_t> frame) {
  ByteReader r = body_of(frame, StageFrameKind::kSampled);
  StageSampled s;
  s.pass = r.u64("pass");
  const uint32_t n = r.u32("token count");
  r.need(n, 12, "tokens");
  s.tokens.resize(n);
  for (SampledToken& t : s.tokens) {
    t.token = static_cast<int32_t>(r.u32("token"));
    t.logprob = std::bit_cast<float>(r.u32("logprob"));
    const uint32_t top = r.u32("top count");
    r.need(top, 8, "top");
    t.top.resize(top);
    for (TokenLogprob& e : t.top) {
      e.token = static_cast<int32_t>(r.u32("top token"));
      e.logprob = std::bit_cast<float>(r.u32("top logprob"));
    }
  }
  expect_done(r);
  return s;
}

std::string decode_stage_error(std::span<const uint8_t> frame) {
  ByteReader r = body_of(frame, StageFrameKind::kError);
  const uint32_t n = r.u32("message length");
  std::string message(r.string(n, "message"));
  expect_done(r);
  return message;
}

std::vector<uint8_t> encode_stage_weights(uint64_t version) {
  std::vector<uint8_t> out = begin_frame(StageFrameKind::kWeights);
  ByteWriter(&out).u64(version);
  return end_frame(std::move(out));
}

uint64_t decode_stage_weights(std::span<const uint8_t> frame) {
  ByteReader r = body_of(frame, StageFrameKind::kWeights);
  const uint64_t version = r.u64("version");
  expect_done(r);
  return version;
}

std::vector<uint8_t> encode_stage_commit(const StageCommit& c) {
  STOA_CHECK(c.chain.size() <= kMaxChain, ErrorKind::kInvalidArgument, "a chain of ",
             c.chain.size(), " commitments (at most ", kMaxChain, ")");
  std::vector<uint8_t> out = begin_frame(StageFrameKind::kCommit);
  out.reserve(out.size() + 12 + c.chain.size() * kCommitmentBytes + 8);
  ByteWriter w(&out);
  w.u64(c.seq);
  w.u32(static_cast<uint32_t>(c.chain.size()));
  for (const StageCommitment& e : c.chain) {
    w.u32(static_cast<uint32_t>(e.stage));
    w.u64(static_cast<uint64_t>(e.end_layer));
    w.u64(static_cast<uint64_t>(e.rows));
    w.u64(static_cast<uint64_t>(e.draws));
    w.bytes(e.in.data(), e.in.size());
    w.bytes(e.out.data(), e.out.size());
    w.bytes(e.signature.data(), e.signature.size());
  }
  return end_frame(std::move(out));
}

StageCommit decode_stage_commit(std::span<const uint8_t> frame) {
  ByteReader r = body_of(frame, StageFrameKind::kCommit);
  StageCommit c;
  c.seq = r.u64("seq");
  const uint32_t n = r.u32("chain length");
  if (n > kMaxChain) r.bad(cat("a chain of ", n, " commitments (at most ", kMaxChain, ")"));
  r.need(n, kCommitmentBytes, "chain");
  c.chain.resize(n);
  for (StageCommitment& e : c.chain) {
    e.stage = static_cast<int32_t>(r.u32("stage"));
    e.end_layer = static_cast<int64_t>(r.u64("end layer"));
    e.rows = static_cast<int64_t>(r.u64("rows"));
    e.draws = static_cast<int64_t>(r.u64("draws"));
    for (std::span<uint8_t> field :
         {std::span<uint8_t>(e.in), std::span<uint8_t>(e.out), std::span<uint8_t>(e.signature)}) {
      const std::span<const uint8_t> b = r.take(field.size(), "digest");
      std::copy(b.begin(), b.end(), field.begin());
    }
  }
  expect_done(r);
  return c;
}

int64_t stage_pass_bytes(int64_t tokens, int64_t inputs, int64_t requests, int64_t hidden) {
  return static_cast<int64_t>(kEnvelope) + 8 + 4 + inputs * kInputBytes + tokens * 4 + 4 +
         requests * kRequestBytes + 4 + tokens * hidden * 4;
}

}  // namespace stoa::engine
