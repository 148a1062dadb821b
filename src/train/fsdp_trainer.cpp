// The Trainer's fully sharded half (docs/design/distributed-trainer.md, "FSDP"): starting the
// ranks' shards from a source or a sharded checkpoint, the sharded checkpoint itself, and the
// exports (logits, weights, a model directory) that gather one unit at a time.
//
// A sharded checkpoint is `trainer.json` + `config.json` + `shards/rank-R-of-N.safetensors`: rank
// R's slice of every unit (`u<unit>.master`, `.exp_avg`, `.exp_avg_sq`, f32) and, in the file's
// metadata, the AdamW step of every piece it holds. The units do not depend on the number of
// ranks (fsdp_layout.h), so M ranks resume N's shards by reading the overlapping ranges of the
// old files; no rank ever reads or holds the whole training state. Beside the shards, `model/` is
// the f32 model streamed through rank 0 (one gathered tensor at a time) for what reads a run's
// checkpoint as a model: evaluation, `stoa model export-hf --from`, the demo. Ranks on several
// machines need the checkpoint directory on a filesystem they share (as
// torch.distributed.checkpoint does).
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "train/torch_compat.h"
#include "train/trainer_impl.h"
#include "train/wire.h"

namespace stoa::train {
namespace fs = std::filesystem;
namespace {

std::string shard_file_name(int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof name, "rank-%05d-of-%05d.safetensors", rank, world);
  return name;
}

std::string piece_key(size_t unit, size_t member) {
  return std::to_string(unit) + ":" + std::to_string(member);
}

torch::Tensor host_view(const TensorView& view) {
  return torch::from_blob(view.data, {view.numel()}, torch::kFloat32);
}

}  // namespace

void Trainer::Impl::start_sharded(std::shared_ptr<Communicator> group, const TensorSource* source,
                                  const std::string& resume_dir) {
  if (group && group->world_size() > 1) {
    STOA_CHECK(group->leader(), ErrorKind::kInvalidArgument,
               "a data-parallel Trainer is built on rank 0; rank ", group->rank(),
               " runs Trainer::follow");
    ranks = std::move(group);
    const ModelConfig& config = source ? source->config() : base_config;
    nlohmann::json init = {{"options", train_options_to_json(options)},
                           {"config", model_config_to_json(config)},
                           {"step", step},
                           {"resume", resume_dir}};
    std::vector<uint8_t> cbor = nlohmann::json::to_cbor(init);
    send(kCommandInit, std::string(cbor.begin(), cbor.end()));
  }
  setup_sharded(source, resume_dir);
}

void Trainer::Impl::setup_sharded(const TensorSource* source, const std::string& resume_dir) {
  const ModelConfig config = source ? source->config() : base_config;
  sharded = std::make_unique<ShardedPolicy>(config, device, torch_dtype(options.compute_dtype),
                                            ranks.get());
  trainable = sharded->trainable();
  optimizer = std::make_unique<torch::optim::AdamW>(trainable, adamw_options());
  if (resume_dir.empty()) {
    sharded->load(ranks && !ranks->leader() ? nullptr : source);
  } else {
    load_shards(resume_dir);
  }
  const FsdpLayout& layout = sharded->layout();
  log_info("fsdp", "rank ", sharded->rank(), " of ", layout.world, ": ", layout.units.size(),
           " units, ", layout.shard_numel(), " of ", layout.total_numel(),
           " parameters here (masters, gradients and AdamW moments alike)");
}

void Trainer::Impl::save_shards(const std::string& dir) {
  torch::NoGradGuard no_grad;
  const FsdpLayout& layout = sharded->layout();
  const int rank = sharded->rank();
  std::string error;
  try {
    std::error_code ec;
    fs::create_directories(dir, ec);
    STOA_CHECK(!ec, ErrorKind::kIo, "cannot create ", dir, ": ", ec.message());
    std::vector<torch::Tensor> keep;  // host tensors the views point into
    std::vector<NamedView> views;
    nlohmann::json steps = nlohmann::json::object();
    std::map<size_t, std::pair<torch::Tensor, torch::Tensor>> moments;
    for (size_t u = 0; u < layout.units.size(); ++u) {
      const auto [a, b] = layout.slice(u, rank);
      if (b <= a) continue;
      moments[u] = {torch::zeros({b - a}, torch::kFloat32), torch::zeros({b - a}, torch::kFloat32)};
    }
    for (const ShardedPolicy::Piece& p : sharded->pieces()) {
      auto it = optimizer->state().find(optimizer_state_key(p.values));
      if (it == optimizer->state().end()) continue;
      auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
      const int64_t a = layout.slice(p.unit, rank).first;
      moments[p.unit].first.narrow(0, p.begin - a, p.end - p.begin).copy_(st.exp_avg());
      moments[p.unit].second.narrow(0, p.begin - a, p.end - p.begin).copy_(st.exp_avg_sq());
      steps[piece_key(p.unit, p.member)] = st.step();
    }
    for (auto& [u, m] : moments) {
      const auto [a, b] = layout.slice(u, rank);
      keep.push_back(sharded->master(u).narrow(0, 0, b - a).to(torch::kCPU).contiguous());
      keep.push_back(m.first);
      keep.push_back(m.second);
      const std::string base = "u" + std::to_string(u);
      const char* suffix[3] = {".master", ".exp_avg", ".exp_avg_sq"};
      for (int i = 0; i < 3; ++i) {
        torch::Tensor& t = keep[keep.size() - 3 + static_cast<size_t>(i)];
        views.emplace_back(base + suffix[i], TensorView(t.data_ptr(), DType::kF32, {b - a}));
      }
    }
    write_safetensors((fs::path(dir) / shard_file_name(rank, layout.world)).string(), views,
                      {{"steps", steps.dump()}, {"world", std::to_string(layout.world)}});
  } catch (const std::exception& e) {
    error = e.what();
  }
  // Every rank learns whether every shard was written: a checkpoint is whole or it fails.
  const std::vector<int64_t> failed = ranks && ranks->world_size() > 1
                                          ? ranks->all_gather(error.empty() ? 0 : 1)
                                          : std::vector<int64_t>{error.empty() ? 0 : 1};
  for (size_t r = 0; r < failed.size(); ++r) {
    if (failed[r]) {
      fail(ErrorKind::kIo, "rank ", r, " could not write its checkpoint shard",
           error.empty() ? std::string() : ": " + error);
    }
  }
}

void Trainer::Impl::load_shards(const std::string& checkpoint) {
  torch::NoGradGuard no_grad;
  const fs::path root = fs::path(checkpoint) / "shards";
  const FsdpLayout& layout = sharded->layout();
  const int rank = sharded->rank();
  // The writers' world: from the first file's metadata (every file says the same).
  int old_world = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    int r = 0, w = 0;
    if (std::sscanf(entry.path().filename().string().c_str(), "rank-%d-of-%d.safetensors", &r,
                    &w) == 2)
      old_world = w;
  }
  STOA_CHECK(old_world > 0, ErrorKind::kBadFormat, "checkpoint ", checkpoint,
             " has no shards/rank-R-of-N.safetensors files");
  const FsdpLayout old = plan_fsdp(sharded->config(), old_world);
  STOA_CHECK(old.units.size() == layout.units.size() && old.chunk_rows == layout.chunk_rows,
             ErrorKind::kBadFormat, "checkpoint ", checkpoint, "'s units do not match this model");
  std::vector<SafetensorsFile> files;
  std::map<std::string, int64_t> steps;
  for (int q = 0; q < old_world; ++q) {
    files.push_back(SafetensorsFile::open((root / shard_file_name(q, old_world)).string()));
    auto it = files.back().metadata().find("steps");
    STOA_CHECK(it != files.back().metadata().end(), ErrorKind::kBadFormat, files.back().source(),
               " lacks its AdamW steps");
    const nlohmann::json parsed = nlohmann::json::parse(it->second);  // outlives the loop
    for (const auto& [key, value] : parsed.items()) steps[key] = value.get<int64_t>();
  }
  std::vector<torch::Tensor> exp_avg(layout.units.size()), exp_avg_sq(layout.units.size());
  for (size_t u = 0; u < layout.units.size(); ++u) {
    STOA_CHECK(old.units[u].numel == layout.units[u].numel, ErrorKind::kBadFormat, "checkpoint ",
               checkpoint, ": unit ", u, " has ", old.units[u].numel, " elements; this model ",
               layout.units[u].numel);
    const auto [a, b] = layout.slice(u, rank);
    exp_avg[u] = torch::zeros({std::max<int64_t>(0, b - a)}, torch::kFloat32);
    exp_avg_sq[u] = torch::zeros_like(exp_avg[u]);
    torch::Tensor master = torch::zeros_like(exp_avg[u]);
    for (int q = 0; q < old_world; ++q) {
      const auto [c, d] = old.slice(u, q);
      const int64_t lo = std::max(a, c), hi = std::min(b, d);
      if (lo >= hi) continue;
      const std::string base = "u" + std::to_string(u);
      torch::Tensor* into[3] = {&master, &exp_avg[u], &exp_avg_sq[u]};
      const char* suffix[3] = {".master", ".exp_avg", ".exp_avg_sq"};
      for (int i = 0; i < 3; ++i) {
        const TensorView view = files[static_cast<size_t>(q)].view(base + suffix[i]);
        STOA_CHECK(view.dtype == DType::kF32 && view.numel() == d - c, ErrorKind::kBadFormat,
                   files[static_cast<size_t>(q)].source(), ": ", base, suffix[i], " has ",
                   view.numel(), " elements; expected ", d - c);
        into[i]->narrow(0, lo - a, hi - lo).copy_(host_view(view).narrow(0, lo - c, hi - lo));
        files[static_cast<size_t>(q)].release_pages(base + suffix[i]);
      }
    }
    if (b > a) sharded->master(u).narrow(0, 0, b - a).copy_(master.to(sharded->master(u).device()));
  }
  for (const ShardedPolicy::Piece& p : sharded->pieces()) {
    auto it = steps.find(piece_key(p.unit, p.member));
    if (it == steps.end() || layout.frozen[layout.units[p.unit].members[p.member].tensor]) continue;
    const int64_t a = layout.slice(p.unit, rank).first;
    auto st = std::make_unique<torch::optim::AdamWParamState>();
    st->step(it->second);
    st->exp_avg(exp_avg[p.unit].narrow(0, p.begin - a, p.end - p.begin).clone().to(device));
    st->exp_avg_sq(exp_avg_sq[p.unit].narrow(0, p.begin - a, p.end - p.begin).clone().to(device));
    optimizer->state()[optimizer_state_key(p.values)] = std::move(st);
  }
}

torch::Tensor Trainer::Impl::sharded_logits(const torch::Tensor& tokens) {
  if (distributed()) {
    torch::Tensor host = tokens.to(torch::kCPU, torch::kInt64).contiguous();
    send(kCommandLogits, std::string(static_cast<const char*>(host.data_ptr()), host.nbytes()));
  }
  return sharded->logits(tokens);
}

void Trainer::Impl::gather_weights(
    const std::function<void(const std::string&, const torch::Tensor&)>& take) {
  if (distributed()) send(kCommandGatherWeights, "");
  sharded->gather_all(take);
}

namespace {

// Rank 0's side of save_model under FSDP: the model writer asks for tensors in its own order
// (by dtype, then name); each request is first named to the other ranks (`announce`), then
// gathered by all.
class GatheringSource : public TensorSource {
 public:
  GatheringSource(ShardedPolicy& policy, std::function<void(int64_t)> announce)
      : TensorSource(policy.config(), "the sharded trainer"),
        policy_(policy),
        announce_(std::move(announce)) {
    const auto& specs = policy.layout().specs;
    for (size_t i = 0; i < specs.size(); ++i) index_[specs[i].name] = i;
  }
  Tensor f32(const TensorSpec& spec) const override {
    const size_t which = index_.at(spec.name);
    announce_(static_cast<int64_t>(which));
    Tensor out(DType::kF32, spec.shape);
    policy_.gather_tensor_into(which, out.as<float>());
    return out;
  }
  void finish() const {
    announce_(-1);
    policy_.end_gathers();
  }

 private:
  ShardedPolicy& policy_;
  std::function<void(int64_t)> announce_;
  std::map<std::string, size_t> index_;
};

}  // namespace

void Trainer::Impl::save_model_sharded(const std::string& dir, DType dtype) {
  if (distributed()) send(kCommandGatherChosen, "");
  GatheringSource source(*sharded, [this](int64_t which) {
    if (!distributed()) return;
    std::string bytes(reinterpret_cast<const char*>(&which), sizeof which);
    ranks->broadcast_bytes(&bytes);
  });
  try {
    save_model_dir(source, dir, dtype);
  } catch (...) {
    source.finish();  // the other ranks wait for the end either way
    throw;
  }
  source.finish();
}

void Trainer::Impl::gather_chosen_follower() {
  while (true) {
    std::string bytes;
    ranks->broadcast_bytes(&bytes);
    int64_t which = -1;
    STOA_CHECK(bytes.size() == sizeof which, ErrorKind::kBadFormat, "rank ", ranks->rank(),
               ": a malformed tensor request from rank 0");
    std::memcpy(&which, bytes.data(), sizeof which);
    if (which < 0) break;
    sharded->gather_tensor_into(static_cast<size_t>(which), nullptr);
  }
  sharded->end_gathers();
}

}  // namespace stoa::train
