#include "core/stage_commitment.h"

#include "core/error.h"

namespace stoa {
namespace {

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

std::vector<uint8_t> commitment_message(uint64_t group_id, const StageCommitment& c) {
  static constexpr char kLabel[] = "stoa stage commitment v2";
  std::vector<uint8_t> m(kLabel, kLabel + sizeof(kLabel) - 1);
  put_u64(m, group_id);
  put_u64(m, static_cast<uint64_t>(static_cast<int64_t>(c.stage)));
  put_u64(m, static_cast<uint64_t>(c.end_layer));
  put_u64(m, static_cast<uint64_t>(c.rows));
  put_u64(m, static_cast<uint64_t>(c.draws));
  m.insert(m.end(), c.in.begin(), c.in.end());
  m.insert(m.end(), c.out.begin(), c.out.end());
  return m;
}

void sign_commitment(const SigningKey& key, uint64_t group_id, StageCommitment& c) {
  c.signature = key.sign(commitment_message(group_id, c));
}

bool commitment_signed_by(const PublicKey& key, uint64_t group_id, const StageCommitment& c) {
  return signature_valid(key, commitment_message(group_id, c), c.signature);
}

std::string chain_fault(std::span<const StageCommitment> chain, int64_t num_layers, int* stage) {
  *stage = 0;
  if (chain.size() < 2) return cat("a pipeline's chain holds ", chain.size(), " commitments");
  for (size_t i = 0; i < chain.size(); ++i) {
    const StageCommitment& c = chain[i];
    *stage = static_cast<int>(i);
    const bool last = i + 1 == chain.size();
    if (c.stage != static_cast<int32_t>(i)) return cat("commitment ", i, " names stage ", c.stage);
    if (c.end_layer <= (i == 0 ? 0 : chain[i - 1].end_layer) ||
        (last ? c.end_layer != num_layers : c.end_layer >= num_layers))
      return cat("stage ", i, " commits at layer ", c.end_layer, " (of ", num_layers, ")");
    if (c.rows < 0 || c.draws < 0) return cat("stage ", i, " commits to a negative count");
    if (c.rows != chain[0].rows)
      return cat("stage ", i, " commits to ", c.rows, " rows, the head to ", chain[0].rows);
    if (!last && c.draws != 0) return cat("stage ", i, " is not the last but drew tokens");
    if (i > 0 && c.in != chain[i - 1].out)
      return cat("stage ", i, " received rows other than stage ", i - 1, " committed to send");
  }
  return {};
}

}  // namespace stoa
