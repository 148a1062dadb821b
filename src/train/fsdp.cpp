// The fully sharded policy (fsdp.h). Schedule of one micro-batch, the same on every rank:
//   forward (no autograd): each embedding chunk gathered, its rows looked up; each layer
//     gathered, its input kept, the block run, the parameters dropped;
//   head: the final norm gathered; the logits made chunk by chunk of the vocabulary (each head
//     chunk gathered), the loss differentiated to the logits only;
//   backward: each head chunk gathered again and its product differentiated (its gradient
//     reduce-scattered), the final norm's; then each layer, last first, gathered, recomputed from
//     its kept input and differentiated; last the embedding chunks, whose gradient needs only
//     the tokens (no gather).
#include "train/fsdp.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "core/error.h"

namespace stoa::train {

ShardedPolicy::ShardedPolicy(const ModelConfig& config, torch::Device device,
                             torch::ScalarType compute, Communicator* ranks)
    : layout_(plan_fsdp(config, ranks ? ranks->world_size() : 1)),
      names_(policy_layout(config)),
      math_(config, device, compute),
      ranks_(ranks && ranks->world_size() > 1 ? ranks : nullptr),
      rank_(ranks ? ranks->rank() : 0) {
  attends_ = std::any_of(names_.layers.begin(), names_.layers.end(),
                         [](const PolicyLayerLayout& l) { return l.attention; });
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  for (size_t u = 0; u < layout_.units.size(); ++u) {
    const FsdpUnit& unit = layout_.units[u];
    master_.push_back(torch::zeros({unit.shard}, f32));
    grad_.push_back(torch::zeros({unit.shard}, f32));
    got_grad_.emplace_back(unit.members.size(), false);
    const auto [a, b] = layout_.slice(u, rank_);
    for (size_t m = 0; m < unit.members.size(); ++m) {
      const FsdpMember& member = unit.members[m];
      const int64_t begin = std::max(a, member.offset);
      const int64_t end = std::min(b, member.offset + member.numel());
      if (begin >= end) continue;
      pieces_.push_back({u, m, begin, end, master_[u].narrow(0, begin - a, end - begin)});
    }
  }
}

std::vector<torch::Tensor> ShardedPolicy::trainable() const {
  std::vector<torch::Tensor> out;
  for (const Piece& p : pieces_) {
    if (!layout_.frozen[layout_.units[p.unit].members[p.member].tensor]) out.push_back(p.values);
  }
  return out;
}

void ShardedPolicy::load(const TensorSource* source) {
  torch::NoGradGuard no_grad;
  STOA_CHECK((rank_ == 0) == (source != nullptr), ErrorKind::kInternal,
             "ShardedPolicy::load: rank 0 and only rank 0 reads the source");
  if (source) {
    STOA_CHECK(source->specs().size() == layout_.specs.size(), ErrorKind::kBadFormat,
               source->description(), " has ", source->specs().size(), " tensors; the ",
               arch_name(config().arch), " policy has ", layout_.specs.size());
  }
  const int world = layout_.world;
  // One tensor is converted at a time and kept while its rows feed consecutive units (the
  // chunked embedding), so the source is read once.
  size_t held_spec = SIZE_MAX;
  Tensor held_values;  // the tensor being read, viewed (not copied) by `held`
  torch::Tensor held;
  for (size_t u = 0; u < layout_.units.size(); ++u) {
    const FsdpUnit& unit = layout_.units[u];
    torch::Tensor full = torch::zeros({unit.shard * world}, torch::kFloat32);
    if (source) {
      for (const FsdpMember& m : unit.members) {
        const TensorSpec& spec = layout_.specs[m.tensor];
        if (held_spec != m.tensor) {
          held = torch::Tensor();
          held_values = Tensor();
          held_values = source->f32(source->spec(spec.name));
          STOA_CHECK(held_values.shape() == spec.shape, ErrorKind::kBadFormat,
                     source->description(), ": tensor ", spec.name, " has shape ",
                     shape_string(held_values.shape()), "; the config implies ",
                     shape_string(spec.shape));
          held = torch::from_blob(held_values.data(), {held_values.numel()}, torch::kFloat32);
          held_spec = m.tensor;
        }
        full.narrow(0, m.offset, m.numel())
            .copy_(held.narrow(0, m.row_begin * m.row_numel, m.numel()));
      }
    }
    // Rank 0's unit reaches every rank; each keeps its slice.
    if (ranks_) {
      std::vector<torch::Tensor> one{full};
      ranks_->broadcast(one, 0);
    }
    master_[u].copy_(full.narrow(0, unit.shard * rank_, unit.shard).to(master_[u].device()));
  }
}

torch::Tensor ShardedPolicy::gather(size_t unit) {
  if (!ranks_) return master_[unit];
  torch::Tensor full =
      torch::empty({layout_.units[unit].shard * layout_.world}, master_[unit].options());
  ranks_->all_gather_into(full, master_[unit]);
  return full;
}

torch::Tensor ShardedPolicy::member_view(size_t unit, size_t member,
                                         const torch::Tensor& flat) const {
  const FsdpMember& m = layout_.units[unit].members[member];
  std::vector<int64_t> shape(layout_.specs[m.tensor].shape.begin(),
                             layout_.specs[m.tensor].shape.end());
  if (shape.empty()) shape.push_back(1);
  shape[0] = m.row_end - m.row_begin;
  return flat.narrow(0, m.offset, m.numel()).view(shape);
}

// With `leaves`, each trainable member becomes a fresh leaf that requires grad, listed in
// `grads_of` in member order (frozen members: an undefined entry), for autograd::grad.
PolicyLayer ShardedPolicy::bind_layer(size_t layer, const torch::Tensor& flat, bool leaves,
                                      std::vector<torch::Tensor>* grads_of) const {
  const size_t u = layout_.layer_units[layer];
  const FsdpUnit& unit = layout_.units[u];
  std::map<std::string, torch::Tensor> by_name;
  for (size_t m = 0; m < unit.members.size(); ++m) {
    torch::Tensor t = member_view(u, m, flat);
    const bool trainable = !layout_.frozen[unit.members[m].tensor];
    if (leaves) {
      t = t.detach().set_requires_grad(trainable);
      grads_of->push_back(trainable ? t : torch::Tensor());
    }
    by_name[layout_.specs[unit.members[m].tensor].name] = t;
  }
  return bind_policy_layer(config(), names_.layers[layer],
                           [&](const std::string& name) { return by_name.at(name); });
}

void ShardedPolicy::scatter_grads(size_t unit, const std::vector<torch::Tensor>& member_grads) {
  torch::NoGradGuard no_grad;
  const FsdpUnit& u = layout_.units[unit];
  const int64_t members = static_cast<int64_t>(u.members.size());
  if (!ranks_) {
    for (size_t m = 0; m < u.members.size(); ++m) {
      if (!member_grads[m].defined()) continue;
      grad_[unit]
          .narrow(0, u.members[m].offset, u.members[m].numel())
          .add_(member_grads[m].reshape({-1}));
      got_grad_[unit][m] = true;
    }
    return;
  }
  // The unit's gradient, then one flag per member (1: this rank has a gradient for it).
  const int64_t padded = u.shard * layout_.world;
  torch::Tensor full = torch::zeros({padded + members}, grad_[unit].options());
  for (size_t m = 0; m < u.members.size(); ++m) {
    if (!member_grads[m].defined()) continue;
    full.narrow(0, u.members[m].offset, u.members[m].numel()).copy_(member_grads[m].reshape({-1}));
    full[padded + static_cast<int64_t>(m)] = 1.0f;
  }
  ranks_->reduce_scatter_sum(full);
  grad_[unit].add_(full.narrow(0, u.shard * rank_, u.shard));
  torch::Tensor flags = full.narrow(0, padded, members).to(torch::kCPU);
  for (int64_t m = 0; m < members; ++m) {
    if (flags[m].item<float>() > 0) got_grad_[unit][static_cast<size_t>(m)] = true;
  }
}

// The embedding rows of the tokens that fall in unit u's chunk of the vocabulary, into x.
void ShardedPolicy::look_up_rows(size_t u, const torch::Tensor& flat, const torch::Tensor& tokens,
                                 torch::Tensor* x) const {
  const FsdpUnit& unit = layout_.units[u];
  torch::Tensor inside = (tokens >= unit.row_begin) & (tokens < unit.row_end);
  torch::Tensor rows = (tokens - unit.row_begin).clamp(0, unit.row_end - unit.row_begin - 1);
  *x = torch::where(inside.unsqueeze(-1), math_.embed(member_view(u, 0, flat), rows), *x);
}

void ShardedPolicy::forward_backward(const MicroBatch* batch) {
  const bool real = batch != nullptr;
  const int64_t H = config().hidden_size;
  const size_t L = layout_.layer_units.size();
  torch::Tensor tokens, cos, sin, x;
  std::vector<torch::Tensor> inputs(L);
  {
    torch::NoGradGuard no_grad;
    if (real) {
      tokens = batch->tokens.to(math_.device(), torch::kInt64);
      std::tie(cos, sin) = math_.rope(tokens.size(1), attends_);
      x = torch::zeros({tokens.size(0), tokens.size(1), H}, master_[0].options());
    }
    for (size_t u : layout_.embedding_units) {
      torch::Tensor flat = gather(u);
      if (real) look_up_rows(u, flat, tokens, &x);
    }
    for (size_t i = 0; i < L; ++i) {
      torch::Tensor flat = gather(layout_.layer_units[i]);
      if (!real) continue;
      inputs[i] = x;
      x = math_.block(bind_layer(i, flat, false, nullptr), x, cos, sin);
    }
  }
  // Head: the final norm with autograd, the logits without, the loss to the logits.
  const std::vector<size_t>& head =
      layout_.head_units.empty() ? layout_.embedding_units : layout_.head_units;
  torch::Tensor norm_flat = gather(layout_.final_norm_unit);
  torch::Tensor h, norm_w, selected, dlogits;
  if (real) {
    h = x.detach().set_requires_grad(true);
    norm_w = member_view(layout_.final_norm_unit, 0, norm_flat).detach().set_requires_grad(true);
    selected = math_.rms_norm(h, norm_w).reshape({-1, H}).index_select(0, batch->positions);
  }
  norm_flat = torch::Tensor();
  torch::Tensor logits;
  {
    torch::NoGradGuard no_grad;
    if (real) {
      logits = torch::empty({selected.size(0), config().vocab_size}, master_[0].options());
    }
    for (size_t u : head) {
      torch::Tensor flat = gather(u);
      if (!real) continue;
      const FsdpUnit& unit = layout_.units[u];
      logits.narrow(1, unit.row_begin, unit.row_end - unit.row_begin)
          .copy_(math_.linear(selected.detach(), member_view(u, 0, flat)));
    }
  }
  if (real) {
    logits.set_requires_grad(true);
    torch::Tensor loss = batch->loss_of(logits);
    dlogits = torch::autograd::grad({loss}, {logits})[0];
    logits = torch::Tensor();
  }
  torch::Tensor dselected = real ? torch::zeros_like(selected) : torch::Tensor();
  for (size_t u : head) {
    torch::Tensor flat = gather(u);
    std::vector<torch::Tensor> grads(1);
    if (real) {
      const FsdpUnit& unit = layout_.units[u];
      torch::Tensor w = member_view(u, 0, flat).detach().set_requires_grad(true);
      torch::Tensor in = selected.detach().set_requires_grad(true);
      torch::Tensor y = math_.linear(in, w);
      auto g = torch::autograd::grad(
          {y}, {in, w}, {dlogits.narrow(1, unit.row_begin, unit.row_end - unit.row_begin)});
      dselected.add_(g[0]);
      grads[0] = g[1];
    }
    flat = torch::Tensor();
    scatter_grads(u, grads);
  }
  torch::Tensor dx;
  {
    std::vector<torch::Tensor> grads(1);
    if (real) {
      auto g = torch::autograd::grad({selected}, {h, norm_w}, {dselected});
      dx = g[0];
      grads[0] = g[1];
      selected = dselected = dlogits = h = torch::Tensor();
    }
    scatter_grads(layout_.final_norm_unit, grads);
  }
  for (size_t i = L; i-- > 0;) {
    const size_t u = layout_.layer_units[i];
    torch::Tensor flat = gather(u);
    std::vector<torch::Tensor> grads(layout_.units[u].members.size());
    if (real) {
      std::vector<torch::Tensor> leaves;
      PolicyLayer layer = bind_layer(i, flat, true, &leaves);
      torch::Tensor in = inputs[i].detach().set_requires_grad(true);
      inputs[i] = torch::Tensor();
      torch::Tensor y = math_.block(layer, in, cos, sin);
      std::vector<torch::Tensor> wrt{in};
      for (const torch::Tensor& leaf : leaves) {
        if (leaf.defined()) wrt.push_back(leaf);
      }
      auto g = torch::autograd::grad({y}, wrt, {dx}, /*retain_graph=*/false,
                                     /*create_graph=*/false, /*allow_unused=*/true);
      dx = g[0];
      size_t at = 1;
      for (size_t m = 0; m < leaves.size(); ++m) {
        if (leaves[m].defined()) grads[m] = g[at++];
      }
    }
    flat = torch::Tensor();
    scatter_grads(u, grads);
  }
  for (size_t u : layout_.embedding_units) {
    std::vector<torch::Tensor> grads(1);
    if (real) {
      torch::NoGradGuard no_grad;
      const FsdpUnit& unit = layout_.units[u];
      torch::Tensor ids = tokens.reshape({-1});
      torch::Tensor inside =
          ((ids >= unit.row_begin) & (ids < unit.row_end)).nonzero().reshape({-1});
      grads[0] = torch::zeros({unit.row_end - unit.row_begin, H}, master_[0].options())
                     .index_add_(0, ids.index_select(0, inside) - unit.row_begin,
                                 dx.reshape({-1, H}).index_select(0, inside));
    }
    scatter_grads(u, grads);
  }
}

void ShardedPolicy::zero_grads() {
  torch::NoGradGuard no_grad;
  for (torch::Tensor& g : grad_) g.zero_();
  for (auto& flags : got_grad_) std::fill(flags.begin(), flags.end(), false);
  for (Piece& p : pieces_) p.values.mutable_grad() = torch::Tensor();
}

void ShardedPolicy::attach_grads() {
  for (Piece& p : pieces_) {
    const int64_t a = layout_.slice(p.unit, rank_).first;
    p.values.mutable_grad() = got_grad_[p.unit][p.member]
                                  ? grad_[p.unit].narrow(0, p.begin - a, p.end - p.begin)
                                  : torch::Tensor();
  }
}

torch::Tensor ShardedPolicy::logits(const torch::Tensor& tokens_in) {
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = tokens_in.to(math_.device(), torch::kInt64);
  const int64_t B = tokens.size(0), T = tokens.size(1), H = config().hidden_size;
  auto [cos, sin] = math_.rope(T, attends_);
  torch::Tensor x = torch::zeros({B, T, H}, master_[0].options());
  for (size_t u : layout_.embedding_units) look_up_rows(u, gather(u), tokens, &x);
  for (size_t i = 0; i < layout_.layer_units.size(); ++i)
    x = math_.block(bind_layer(i, gather(layout_.layer_units[i]), false, nullptr), x, cos, sin);
  x = math_.rms_norm(x, member_view(layout_.final_norm_unit, 0, gather(layout_.final_norm_unit)));
  torch::Tensor out = torch::empty({B, T, config().vocab_size}, x.options());
  const std::vector<size_t>& head =
      layout_.head_units.empty() ? layout_.embedding_units : layout_.head_units;
  for (size_t u : head) {
    const FsdpUnit& unit = layout_.units[u];
    out.narrow(2, unit.row_begin, unit.row_end - unit.row_begin)
        .copy_(math_.linear(x, member_view(u, 0, gather(u))));
  }
  return out;
}

std::vector<size_t> ShardedPolicy::specs_in_name_order() const {
  std::vector<size_t> order(layout_.specs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return layout_.specs[a].name < layout_.specs[b].name; });
  return order;
}

const torch::Tensor& ShardedPolicy::gathered(size_t unit) {
  if (cached_unit_ != unit) {
    cached_flat_ = torch::Tensor();  // the previous unit's buffer goes first
    cached_flat_ = gather(unit);
    cached_unit_ = unit;
  }
  return cached_flat_;
}

void ShardedPolicy::gather_tensor_into(size_t spec, float* out) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> shape(layout_.specs[spec].shape.begin(), layout_.specs[spec].shape.end());
  torch::Tensor host = out ? torch::from_blob(out, shape, torch::kFloat32) : torch::Tensor();
  for (size_t u = 0; u < layout_.units.size(); ++u) {
    for (size_t m = 0; m < layout_.units[u].members.size(); ++m) {
      const FsdpMember& member = layout_.units[u].members[m];
      if (member.tensor != spec) continue;
      const torch::Tensor& flat = gathered(u);
      if (!out) continue;  // a rank that only takes part
      host.narrow(0, member.row_begin, member.row_end - member.row_begin)
          .copy_(member_view(u, m, flat));
    }
  }
}

torch::Tensor ShardedPolicy::gather_tensor(size_t spec) {
  torch::NoGradGuard no_grad;
  size_t parts = 0, unit = 0, member = 0;  // (unit, member) holding rows of `spec`
  for (size_t u = 0; u < layout_.units.size(); ++u) {
    for (size_t m = 0; m < layout_.units[u].members.size(); ++m) {
      if (layout_.units[u].members[m].tensor != spec) continue;
      ++parts;
      unit = u;
      member = m;
    }
  }
  if (parts == 1) return member_view(unit, member, gathered(unit));  // no copy
  // Rows in several units (the chunked embedding): assembled on the host.
  std::vector<int64_t> shape(layout_.specs[spec].shape.begin(), layout_.specs[spec].shape.end());
  torch::Tensor whole = torch::empty(shape, torch::kFloat32);
  gather_tensor_into(spec, whole.data_ptr<float>());
  return whole;
}

void ShardedPolicy::gather_all(
    const std::function<void(const std::string&, const torch::Tensor&)>& take) {
  for (size_t spec : specs_in_name_order()) {
    if (take) {
      take(layout_.specs[spec].name, gather_tensor(spec));
    } else {
      gather_tensor_into(spec, nullptr);
    }
  }
  end_gathers();
}

void ShardedPolicy::end_gathers() {
  cached_flat_ = torch::Tensor();
  cached_unit_ = SIZE_MAX;
}

}  // namespace stoa::train
