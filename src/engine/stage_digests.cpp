#include "engine/stage_digests.h"

#include <cstring>
#include <vector>

namespace stoa::engine {
namespace {

void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_u64(std::vector<uint8_t>& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t bits_of(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

}  // namespace

void hash_row(Sha256& h, uint64_t version, std::span<const float> row) {
  uint8_t v[8];  // per row, per stage: no allocation
  for (int i = 0; i < 8; ++i) v[i] = static_cast<uint8_t>(version >> (8 * i));
  h.update(v, sizeof v);
  h.update(row.data(), row.size_bytes());
}

void hash_draw(Sha256& h, uint64_t version, const SampledToken& token) {
  thread_local std::vector<uint8_t> b;
  b.clear();
  put_u64(b, version);
  put_u32(b, static_cast<uint32_t>(token.token));
  put_u32(b, bits_of(token.logprob));
  put_u32(b, static_cast<uint32_t>(token.top.size()));
  for (const TokenLogprob& t : token.top) {
    put_u32(b, static_cast<uint32_t>(t.token));
    put_u32(b, bits_of(t.logprob));
  }
  h.update(b.data(), b.size());
}

StageCommitment SequenceDigests::commitment(int32_t stage, int64_t end_layer, bool head) const {
  StageCommitment c;
  c.stage = stage;
  c.end_layer = end_layer;
  c.rows = rows;
  c.draws = draws;
  if (!head) c.in = in.digest();
  c.out = out.digest();
  return c;
}

}  // namespace stoa::engine
