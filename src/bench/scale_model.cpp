#include "bench/scale_model.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "core/dtype.h"
#include "core/error.h"
#include "core/int8_grid.h"
#include "model/gguf_source.h"
#include "model/presets.h"
#include "model/weights.h"
#include "pulse/anchor_writer.h"
#include "pulse/int8_state.h"
#include "pulse/model_view.h"

namespace stoa::bench {

ModelConfig scale_config(const std::string& preset, int layers) {
  ModelConfig c = preset_config(preset);
  if (layers <= 0 || layers >= c.num_layers) return c;
  c.num_layers = layers;
  c.layer_kinds.resize(static_cast<size_t>(layers));
  c.num_dense_layers = std::min<int64_t>(c.num_dense_layers, layers);
  // The GGUF metadata of a model without attention has no KV heads, which readers refuse.
  STOA_CHECK(std::count(c.layer_kinds.begin(), c.layer_kinds.end(), LayerKind::kAttention) > 0,
             ErrorKind::kInvalidArgument, "stoa bench scale: the first ", layers, " layers of ",
             preset, " have no attention layer; cut after one (--layers larger)");
  validate_model_config(c, preset + " cut to " + std::to_string(layers) + " layers");
  return c;
}

namespace {

// One tensor of the int8 view, as the precision plan carries it.
pulse::StateTensor view_tensor(const GgufTensorSource& source, const TensorSpec& spec,
                               pulse::TensorKind kind) {
  pulse::StateTensor t;
  t.kind = kind;
  t.shape = spec.shape;
  if (kind == pulse::TensorKind::kInt8) {
    if (auto q = source.int8(spec)) {
      t.q = std::move(*q);  // Q8_0 blocks verbatim: the grid the file holds
    } else {
      const Tensor f = source.f32(spec);
      t.q = int8_quantize(f.as<const float>(), spec.shape[0], spec.shape[1]);
    }
    return t;
  }
  const Tensor f = source.f32(spec);
  const float* x = f.as<const float>();
  const size_t n = static_cast<size_t>(f.numel());
  if (kind == pulse::TensorKind::kBf16) {
    t.bf16.resize(n);
    for (size_t i = 0; i < n; ++i) t.bf16[i] = f32_to_bf16(x[i]);
  } else {
    t.f32.resize(n);
    for (size_t i = 0; i < n; ++i) t.f32[i] = f32_bits(x[i]);
  }
  return t;
}

}  // namespace

AnchorFromModel write_anchor_from_model(const std::string& model_dir, pulse::BlobStore& store,
                                        uint64_t version) {
  namespace fs = std::filesystem;
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig config = load_model_config((fs::path(model_dir) / "config.json").string());
  GgufTensorSource source((fs::path(model_dir) / kModelGgufName).string());
  std::vector<TensorSpec> specs = source.specs();
  std::sort(specs.begin(), specs.end(),
            [](const TensorSpec& a, const TensorSpec& b) { return a.name < b.name; });
  std::vector<pulse::TensorLayout> layouts;
  for (const auto& s : specs)
    layouts.push_back({s.name, pulse::tensor_kind_for(s.name, s.shape), s.shape});
  const std::string temp = (fs::path(store.dir()) / ".anchor.writing").string();
  pulse::AnchorFileWriter writer(temp, version, pulse::config_hash(config), layouts);
  AnchorFromModel out;
  for (size_t i = 0; i < specs.size(); ++i) {
    const pulse::StateTensor t = view_tensor(source, specs[i], layouts[i].kind);
    out.int8_bytes += t.nbytes();
    writer.add(specs[i].name, t);
  }
  const pulse::WrittenAnchor written = writer.finish();
  pulse::adopt_into_store(temp, store.path_of(written.blob_hash));
  out.entry = pulse::CatalogEntry{pulse::BlobKind::kAnchor, version, version, written.blob_hash,
                                  written.bytes};
  out.state_hash = written.header.state_hash;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace stoa::bench
