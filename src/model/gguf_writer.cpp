#include "model/gguf_writer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/dtype.h"
#include "core/enum_names.h"
#include "core/error.h"
#include "model/arch_registry.h"
#include "model/gguf_arch_map.h"
#include "model/precision_plan.h"
#include "model/tensor_source.h"

namespace stoa {

using gguf::GgmlType;
using gguf::Value;
using gguf::ValueType;

namespace {

// Appends little-endian scalars and GGUF strings to a byte buffer (the header is small; tensor
// data is streamed straight to the file).
class ByteSink {
 public:
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

void put_scalar(ByteSink& out, ValueType type, const Value& v, const std::string& key) {
  switch (type) {
    case ValueType::kU8:
      out.put<uint8_t>(static_cast<uint8_t>(v.i));
      break;
    case ValueType::kI8:
      out.put<int8_t>(static_cast<int8_t>(v.i));
      break;
    case ValueType::kU16:
      out.put<uint16_t>(static_cast<uint16_t>(v.i));
      break;
    case ValueType::kI16:
      out.put<int16_t>(static_cast<int16_t>(v.i));
      break;
    case ValueType::kU32:
      out.put<uint32_t>(static_cast<uint32_t>(v.i));
      break;
    case ValueType::kI32:
      out.put<int32_t>(static_cast<int32_t>(v.i));
      break;
    case ValueType::kU64:
      out.put<uint64_t>(static_cast<uint64_t>(v.i));
      break;
    case ValueType::kI64:
      out.put<int64_t>(v.i);
      break;
    case ValueType::kF32:
      out.put<float>(static_cast<float>(v.f));
      break;
    case ValueType::kF64:
      out.put<double>(v.f);
      break;
    case ValueType::kBool:
      out.put<uint8_t>(v.i ? 1 : 0);
      break;
    case ValueType::kString:
      out.put_string(v.str);
      break;
    case ValueType::kArray:
      fail(ErrorKind::kInvalidArgument, "GGUF key '", key, "': nested arrays are not written");
  }
}

void put_value(ByteSink& out, const Value& v, const std::string& key) {
  out.put<uint32_t>(static_cast<uint32_t>(v.type));
  if (v.type != ValueType::kArray) {
    put_scalar(out, v.type, v, key);
    return;
  }
  out.put<uint32_t>(static_cast<uint32_t>(v.array_type));
  out.put<uint64_t>(v.items.size());
  for (const Value& item : v.items) {
    STOA_CHECK(item.type == v.array_type, ErrorKind::kInvalidArgument, "GGUF key '", key,
               "': array of ", gguf::value_type_name(v.array_type), " holds a ",
               gguf::value_type_name(item.type));
    put_scalar(out, v.array_type, item, key);
  }
}

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

}  // namespace

void GgufWriter::set(const std::string& key, Value value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne,
                            std::vector<uint8_t> data) {
  uint64_t nbytes = data.size();
  add_tensor_streamed(std::move(name), type, std::move(ne), Producer{});
  PendingTensor& t = tensors_.back();
  STOA_CHECK(nbytes == t.nbytes, ErrorKind::kInvalidArgument, "GGUF tensor '", t.name, "' (",
             gguf::ggml_type_name(type), ") needs ", t.nbytes, " bytes, got ", nbytes);
  t.data = std::move(data);
}

void GgufWriter::add_tensor_streamed(std::string name, GgmlType type, std::vector<int64_t> ne,
                                     Producer produce) {
  STOA_CHECK(!ne.empty() && ne.size() <= 4, ErrorKind::kInvalidArgument, "GGUF tensor '", name,
             "' must have 1 to 4 dimensions, got ", ne.size());
  for (const PendingTensor& t : tensors_)
    STOA_CHECK(t.name != name, ErrorKind::kInvalidArgument, "GGUF tensor '", name, "' added twice");
  uint64_t rows = 1;
  for (size_t k = 1; k < ne.size(); ++k) {
    STOA_CHECK(ne[k] > 0, ErrorKind::kInvalidArgument, "GGUF tensor '", name,
               "' has a non-positive dimension");
    rows *= static_cast<uint64_t>(ne[k]);
  }
  uint64_t expect = rows * gguf::row_bytes(type, ne[0]);
  tensors_.push_back({std::move(name), type, std::move(ne), expect, {}, std::move(produce)});
}

void GgufWriter::write(const std::string& path) const {
  uint64_t alignment = gguf::kDefaultAlignment;
  ByteSink head;
  head.put<uint32_t>(gguf::kMagic);
  head.put<uint32_t>(gguf::kVersion);
  head.put<uint64_t>(tensors_.size());
  head.put<uint64_t>(kv_.size());
  for (const auto& [key, value] : kv_) {
    if (key == "general.alignment") {
      STOA_CHECK(value.is_integer() && value.i > 0 && (value.i & (value.i - 1)) == 0,
                 ErrorKind::kInvalidArgument, "general.alignment must be a power of two");
      alignment = static_cast<uint64_t>(value.i);
    }
    head.put_string(key);
    put_value(head, value, key);
  }
  std::vector<uint64_t> offsets;
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    offset = align_up(offset, alignment);
    offsets.push_back(offset);
    head.put_string(t.name);
    head.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) head.put<uint64_t>(static_cast<uint64_t>(n));
    head.put<uint32_t>(static_cast<uint32_t>(t.type));
    head.put<uint64_t>(offset);
    offset += t.nbytes;
  }
  head.pad_to(alignment);

  std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  STOA_CHECK(out.good(), ErrorKind::kIo, "cannot open '", tmp, "' for writing");
  try {
    out.write(reinterpret_cast<const char*>(head.bytes().data()),
              static_cast<std::streamsize>(head.bytes().size()));
    static const char zeros[256] = {};
    uint64_t written = 0;
    for (size_t k = 0; k < tensors_.size(); ++k) {
      const PendingTensor& t = tensors_[k];
      while (written < offsets[k]) {
        uint64_t n = std::min<uint64_t>(sizeof(zeros), offsets[k] - written);
        out.write(zeros, static_cast<std::streamsize>(n));
        written += n;
      }
      std::vector<uint8_t> made;
      if (t.produce) made = t.produce();
      const std::vector<uint8_t>& bytes = t.produce ? made : t.data;
      STOA_CHECK(bytes.size() == t.nbytes, ErrorKind::kInternal, "GGUF tensor '", t.name,
                 "' was made with ", bytes.size(), " bytes, its header says ", t.nbytes);
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
      STOA_CHECK(out.good(), ErrorKind::kIo, "writing '", tmp, "' failed at tensor '", t.name,
                 "' (file offset ", head.bytes().size() + offsets[k], "; disk full?)");
      written += t.nbytes;
    }
    out.flush();
    STOA_CHECK(out.good(), ErrorKind::kIo, "writing '", tmp, "' failed (disk full?)");
    out.close();
  } catch (...) {
    out.close();
    std::remove(tmp.c_str());
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::remove(tmp.c_str());
  STOA_CHECK(!ec, ErrorKind::kIo, "cannot rename '", tmp, "' to '", path, "': ", ec.message());
}

constexpr EnumName<GgufExportType> kExportTypeNames[] = {
    {GgufExportType::kF32, "f32"}, {GgufExportType::kF16, "f16"}, {GgufExportType::kQ8_0, "q8_0"}};

const char* gguf_export_type_name(GgufExportType type) {
  return enum_name(kExportTypeNames, type);
}

GgufExportType parse_gguf_export_type(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (auto type = enum_from_name(kExportTypeNames, lower)) return *type;
  if (lower == "q8") return GgufExportType::kQ8_0;
  fail(ErrorKind::kInvalidArgument, "GGUF type '", name, "' is not one of f32, f16, q8_0");
}

namespace {

// Q8_0 exactly where the precision plan puts the tensor on the int8 grid, so the llama.cpp oracle
// and the engine/PULSE workers round the same weights. A stacked tensor (experts) is Q8_0 only when
// every source is; they share a shape and role, so mixed answers mean the plan table is wrong.
bool q8_by_precision_plan(const GgufTensorPlan& plan) {
  size_t int8 = 0;
  for (size_t s = 0; s < plan.sources.size(); ++s)
    if (carrier_for(plan.sources[s], plan.source_shapes[s]) == Carrier::kInt8Grid) ++int8;
  STOA_CHECK(int8 == 0 || int8 == plan.sources.size(), ErrorKind::kInternal, "GGUF export: '",
             plan.gguf_name, "' stacks tensors of different precision carriers");
  return int8 > 0;
}

void append_q8(const Int8Matrix& m, std::vector<uint8_t>* out) {
  int64_t groups = m.groups_per_row();
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      uint16_t scale = m.scales[static_cast<size_t>(r * groups + g)];
      size_t at = out->size();
      out->resize(at + gguf::kQ8BlockBytes);
      std::memcpy(out->data() + at, &scale, 2);
      std::memcpy(out->data() + at + 2, m.row(r) + g * kInt8GroupSize, kInt8GroupSize);
    }
  }
}

// One GGUF tensor's bytes from its source tensors (several when experts are stacked).
std::vector<uint8_t> gguf_tensor_bytes(const TensorSource& source, const GgufTensorPlan& plan,
                                       GgmlType type, const GgufExportOptions& options) {
  std::vector<uint8_t> data;
  // Sized once: growing by doubling would hold up to twice the tensor's bytes.
  int64_t plan_rows = shape_numel(plan.shape) / plan.shape.back();
  data.reserve(static_cast<size_t>(plan_rows) * gguf::row_bytes(type, plan.shape.back()));
  for (size_t s = 0; s < plan.sources.size(); ++s) {
    const TensorSpec& spec = source.spec(plan.sources[s]);
    const Shape& shape = plan.source_shapes[s];
    STOA_CHECK(spec.shape == shape, ErrorKind::kInternal, "GGUF export: tensor '", spec.name,
               "' is ", shape_string(spec.shape), ", the GGUF plan says ", shape_string(shape));
    if (type == GgmlType::kQ8_0) {
      int64_t cols = shape.back();
      int64_t rows = shape_numel(shape) / cols;
      const Int8Matrix* given = nullptr;
      if (options.int8) {
        auto it = options.int8->find(spec.name);
        if (it != options.int8->end()) given = &it->second;
      }
      if (given) {
        STOA_CHECK(given->rows == rows && given->cols == cols, ErrorKind::kInvalidArgument,
                   "GGUF export: int8 matrix for '", spec.name, "' is [", given->rows, ", ",
                   given->cols, "], the tensor is ", shape_string(shape));
        append_q8(*given, &data);
      } else if (std::optional<Int8Matrix> stored = source.int8(spec)) {
        append_q8(*stored, &data);
      } else {
        Tensor f = source.f32(spec);
        append_q8(int8_quantize(f.as<float>(), rows, cols), &data);
      }
      continue;
    }
    Tensor f = source.f32(spec);
    size_t at = data.size();
    if (type == GgmlType::kF16) {
      data.resize(at + static_cast<size_t>(f.numel()) * 2);
      convert_f32_to_f16(f.as<float>(), reinterpret_cast<uint16_t*>(data.data() + at),
                         static_cast<size_t>(f.numel()));
    } else {
      data.resize(at + f.nbytes());
      std::memcpy(data.data() + at, f.data(), f.nbytes());
    }
  }
  return data;
}

}  // namespace

void export_gguf(const ModelWeights& weights, const std::string& path,
                 const GgufExportOptions& options) {
  for (const TensorSpec& spec : expected_tensors(weights.config)) {
    const Tensor& t = weights.at(spec.name);
    STOA_CHECK(t.shape() == spec.shape, ErrorKind::kInvalidArgument, "GGUF export: tensor '",
               spec.name, "' has shape ", shape_string(t.shape()), ", the config implies ",
               shape_string(spec.shape));
  }
  export_gguf(WeightsTensorSource(weights), path, options);
}

void export_gguf(const TensorSource& source, const std::string& path,
                 const GgufExportOptions& options) {
  const ModelConfig& config = source.config();
  GgufWriter writer;
  uint32_t file_type = 0;                                    // llama_ftype: ALL_F32
  if (options.type == GgufExportType::kF16) file_type = 1;   // MOSTLY_F16
  if (options.type == GgufExportType::kQ8_0) file_type = 7;  // MOSTLY_Q8_0
  auto metadata = gguf_metadata(config);
  writer.set(metadata.front().first, metadata.front().second);  // general.architecture first
  if (!options.model_name.empty()) writer.set("general.name", Value::string(options.model_name));
  writer.set("general.file_type", Value::u32(file_type));
  if (options.type == GgufExportType::kQ8_0)
    writer.set("general.quantization_version", Value::u32(2));
  writer.set("general.alignment", Value::u32(static_cast<uint32_t>(gguf::kDefaultAlignment)));
  for (size_t k = 1; k < metadata.size(); ++k) writer.set(metadata[k].first, metadata[k].second);

  for (const GgufTensorPlan& plan : gguf_tensor_plan(config)) {
    std::vector<int64_t> ne(plan.shape.rbegin(), plan.shape.rend());
    GgmlType type = GgmlType::kF32;
    if (plan.matrix && options.type == GgufExportType::kF16) type = GgmlType::kF16;
    if (plan.matrix && options.type == GgufExportType::kQ8_0 && q8_by_precision_plan(plan))
      type = GgmlType::kQ8_0;
    // The writer outlives this loop but not `source`, `options` or the plan copy it captures.
    writer.add_tensor_streamed(
        plan.gguf_name, type, std::move(ne),
        [&source, &options, plan, type] { return gguf_tensor_bytes(source, plan, type, options); });
  }
  // llama.cpp's lfm2moe requires an expert bias; a config without one routes on zeros.
  const TensorRoleRow* bias = find_role_row(arch_info(config.arch), TensorRole::kExpertBias);
  if (bias != nullptr && bias->gguf_name != nullptr && !config.use_expert_bias) {
    for (int64_t l = 0; l < config.num_layers; ++l) {
      if (!config.is_moe_layer(l)) continue;
      std::vector<uint8_t> zeros(static_cast<size_t>(config.num_experts) * 4, 0);
      writer.add_tensor(expand_tensor_pattern(bias->gguf_name, l, -1), GgmlType::kF32,
                        {config.num_experts}, std::move(zeros));
    }
  }
  writer.write(path);
}

}  // namespace stoa
