#include "train/fsdp_layout.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "train/models/policy_layout.h"

namespace stoa::train {
namespace {

// Every tensor name of one layer, in slot order (the absent optional ones left out).
std::vector<std::string> layer_names(const PolicyLayerLayout& l) {
  std::vector<std::string> names = {l.mixer_norm, l.ffn_norm};
  for (const std::string* n :
       {&l.q, &l.k, &l.v, &l.o, &l.q_norm, &l.k_norm, &l.conv_in, &l.conv_in_bias, &l.conv_kernel,
        &l.conv_bias, &l.conv_out, &l.conv_out_bias, &l.gate, &l.up, &l.down, &l.router,
        &l.expert_bias})
    names.push_back(*n);
  for (size_t e = 0; e < l.expert_gate.size(); ++e) {
    names.push_back(l.expert_gate[e]);
    names.push_back(l.expert_up[e]);
    names.push_back(l.expert_down[e]);
  }
  names.erase(std::remove(names.begin(), names.end(), std::string()), names.end());
  return names;
}

int64_t row_numel(const TensorSpec& spec) {
  int64_t n = 1;
  for (size_t d = 1; d < spec.shape.size(); ++d) n *= spec.shape[d];
  return n;
}

}  // namespace

int64_t FsdpLayout::total_numel() const {
  int64_t n = 0;
  for (const FsdpUnit& u : units) n += u.numel;
  return n;
}

int64_t FsdpLayout::shard_numel() const {
  int64_t n = 0;
  for (const FsdpUnit& u : units) n += u.shard;
  return n;
}

std::pair<int64_t, int64_t> FsdpLayout::slice(size_t unit, int rank) const {
  const FsdpUnit& u = units.at(unit);
  const int64_t begin = std::min(u.numel, static_cast<int64_t>(rank) * u.shard);
  return {begin, std::min(u.numel, begin + u.shard)};
}

FsdpLayout plan_fsdp(const ModelConfig& config, int world) {
  STOA_CHECK(world >= 1, ErrorKind::kInvalidArgument, "FSDP needs at least one rank");
  FsdpLayout out;
  out.world = world;
  out.specs = expected_tensors(config);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < out.specs.size(); ++i) index[out.specs[i].name] = i;
  std::vector<bool> placed(out.specs.size(), false);
  auto find = [&](const std::string& name) {
    auto it = index.find(name);
    STOA_CHECK(it != index.end(), ErrorKind::kBadFormat, "the ", arch_name(config.arch),
               " layout names tensor ", name, ", which the config does not have");
    return it->second;
  };
  const PolicyLayout layout = policy_layout(config);
  out.frozen.assign(out.specs.size(), false);
  for (const PolicyLayerLayout& l : layout.layers) {
    if (!l.expert_bias.empty()) out.frozen[find(l.expert_bias)] = true;
  }
  auto finish = [&](FsdpUnit unit) {
    int64_t offset = 0;
    for (FsdpMember& m : unit.members) {
      m.offset = offset;
      offset += m.numel();
    }
    unit.numel = offset;
    unit.shard = (offset + world - 1) / world;
    out.units.push_back(std::move(unit));
    return out.units.size() - 1;
  };
  auto whole = [&](size_t t) {
    placed[t] = true;
    const TensorSpec& s = out.specs[t];
    return FsdpMember{t, 0, s.shape.empty() ? 1 : s.shape[0], row_numel(s), 0};
  };
  std::vector<FsdpUnit> layers;
  int64_t largest_layer = 0;
  for (size_t i = 0; i < layout.layers.size(); ++i) {
    FsdpUnit unit;
    unit.kind = FsdpUnitKind::kLayer;
    unit.layer = static_cast<int64_t>(i);
    for (const std::string& name : layer_names(layout.layers[i])) {
      unit.members.push_back(whole(find(name)));
    }
    int64_t n = 0;
    for (const FsdpMember& m : unit.members) n += m.numel();
    largest_layer = std::max(largest_layer, n);
    layers.push_back(std::move(unit));
  }
  const size_t table = find(layout.embedding);
  const int64_t rows = out.specs[table].shape.at(0);
  const int64_t width = row_numel(out.specs[table]);
  out.chunk_rows =
      std::min(rows, std::max<int64_t>(1024, largest_layer / std::max<int64_t>(1, width)));
  auto chunks = [&](size_t t, FsdpUnitKind kind, std::vector<size_t>* ids) {
    placed[t] = true;
    for (int64_t r = 0; r < rows; r += out.chunk_rows) {
      FsdpUnit unit;
      unit.kind = kind;
      unit.row_begin = r;
      unit.row_end = std::min(rows, r + out.chunk_rows);
      unit.members.push_back({t, unit.row_begin, unit.row_end, width, 0});
      ids->push_back(finish(std::move(unit)));
    }
  };
  chunks(table, FsdpUnitKind::kEmbedding, &out.embedding_units);
  for (FsdpUnit& unit : layers) out.layer_units.push_back(finish(std::move(unit)));
  FsdpUnit norm;
  norm.kind = FsdpUnitKind::kFinalNorm;
  norm.members.push_back(whole(find(layout.final_norm)));
  out.final_norm_unit = finish(std::move(norm));
  if (!layout.lm_head.empty()) {
    const size_t head = find(layout.lm_head);
    STOA_CHECK(out.specs[head].shape.at(0) == rows, ErrorKind::kBadFormat, "the LM head has ",
               out.specs[head].shape.at(0), " rows; the embedding ", rows);
    chunks(head, FsdpUnitKind::kHead, &out.head_units);
  }
  for (size_t i = 0; i < placed.size(); ++i) {
    STOA_CHECK(placed[i], ErrorKind::kBadFormat, "tensor ", out.specs[i].name,
               " belongs to no FSDP unit of the ", arch_name(config.arch), " layout");
  }
  return out;
}

}  // namespace stoa::train
