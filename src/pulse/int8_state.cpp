#include "pulse/int8_state.h"

#include <cstring>

#include "core/enum_names.h"
#include "core/error.h"
#include "model/precision_plan.h"

namespace stoa::pulse {

constexpr EnumName<TensorKind> kTensorKindNames[] = {
    {TensorKind::kInt8, "int8"}, {TensorKind::kBf16, "bf16"}, {TensorKind::kF32, "f32"}};

const char* tensor_kind_name(TensorKind kind) {
  return enum_name(kTensorKindNames, kind);
}

TensorKind tensor_kind_for(const std::string& name, const Shape& shape) {
  switch (carrier_for(name, shape)) {
    case Carrier::kInt8Grid:
      return TensorKind::kInt8;
    case Carrier::kF32:
      return TensorKind::kF32;
    case Carrier::kBf16:
      break;
  }
  return TensorKind::kBf16;
}

Hash128 StateTensor::compute_hash() const {
  StateHasher h;
  if (kind == TensorKind::kInt8) {
    h.add("values", TensorView(const_cast<int8_t*>(q.values.data()), DType::kI8, {q.rows, q.cols}));
    h.add("scales", TensorView(const_cast<uint16_t*>(q.scales.data()), DType::kF16,
                               {q.rows, q.cols / kInt8GroupSize}));
  } else if (kind == TensorKind::kBf16) {
    h.add("values", TensorView(const_cast<uint16_t*>(bf16.data()), DType::kBF16, shape));
  } else {
    h.add("values", TensorView(const_cast<uint32_t*>(f32.data()), DType::kF32, shape));
  }
  return h.finish();
}

static void check_tensor(const std::string& name, const StateTensor& t) {
  STOA_CHECK(!name.empty() && name.size() <= 0xffff, ErrorKind::kInvalidArgument,
             "int8 state: tensor name '", name, "' is empty or longer than 65535 bytes");
  STOA_CHECK(t.shape.size() <= 8, ErrorKind::kInvalidArgument, "int8 state: tensor '", name,
             "' has rank ", t.shape.size(), " (at most 8)");
  for (int64_t d : t.shape)
    STOA_CHECK(d >= 0, ErrorKind::kInvalidArgument, "int8 state: tensor '", name,
               "' has a negative dimension ", shape_string(t.shape));
  if (t.kind == TensorKind::kInt8) {
    STOA_CHECK(int8_grid_fits(t.shape) && t.q.rows == t.shape[0] && t.q.cols == t.shape[1] &&
                   t.q.values.size() == static_cast<size_t>(t.numel()) &&
                   t.q.scales.size() == static_cast<size_t>(t.numel() / kInt8GroupSize),
               ErrorKind::kInvalidArgument, "int8 state: tensor '", name, "' of shape ",
               shape_string(t.shape), " is not a consistent int8 grid matrix");
  } else if (t.kind == TensorKind::kBf16) {
    STOA_CHECK(t.bf16.size() == static_cast<size_t>(t.numel()), ErrorKind::kInvalidArgument,
               "int8 state: bf16 tensor '", name, "' holds ", t.bf16.size(), " values for shape ",
               shape_string(t.shape));
  } else if (t.kind == TensorKind::kF32) {
    STOA_CHECK(t.f32.size() == static_cast<size_t>(t.numel()), ErrorKind::kInvalidArgument,
               "int8 state: f32 tensor '", name, "' holds ", t.f32.size(), " values for shape ",
               shape_string(t.shape));
  } else {
    fail(ErrorKind::kInvalidArgument, "int8 state: tensor '", name, "' has unknown kind ",
         static_cast<int>(t.kind));
  }
}

void Int8State::add(const std::string& name, StateTensor tensor) {
  check_tensor(name, tensor);
  STOA_CHECK(!has(name), ErrorKind::kInvalidArgument, "int8 state: tensor '", name,
             "' added twice");
  Hash128 hash = tensor.compute_hash();
  tensors_.emplace(name, std::move(tensor));
  hashes_.emplace(name, hash);
}

void Int8State::add_hashed(const std::string& name, StateTensor tensor, const Hash128& hash) {
  check_tensor(name, tensor);
  STOA_CHECK(!has(name), ErrorKind::kInvalidArgument, "int8 state: tensor '", name,
             "' added twice");
  tensors_.emplace(name, std::move(tensor));
  hashes_.emplace(name, hash);
}

void Int8State::add_int8(const std::string& name, Int8Matrix q) {
  StateTensor t;
  t.kind = TensorKind::kInt8;
  t.shape = {q.rows, q.cols};
  t.q = std::move(q);
  add(name, std::move(t));
}

void Int8State::add_bf16(const std::string& name, Shape shape, std::vector<uint16_t> values) {
  StateTensor t;
  t.kind = TensorKind::kBf16;
  t.shape = std::move(shape);
  t.bf16 = std::move(values);
  add(name, std::move(t));
}

void Int8State::add_f32(const std::string& name, Shape shape, std::vector<uint32_t> bits) {
  StateTensor t;
  t.kind = TensorKind::kF32;
  t.shape = std::move(shape);
  t.f32 = std::move(bits);
  add(name, std::move(t));
}

const StateTensor& Int8State::at(const std::string& name) const {
  auto it = tensors_.find(name);
  STOA_CHECK(it != tensors_.end(), ErrorKind::kNotFound, "int8 state has no tensor '", name, "'");
  return it->second;
}

Hash128 Int8State::tensor_hash(const std::string& name) const {
  auto it = hashes_.find(name);
  STOA_CHECK(it != hashes_.end(), ErrorKind::kNotFound, "int8 state has no tensor '", name, "'");
  return it->second;
}

static void put_u64(StateHasher& h, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
  h.add_bytes(b, 8);
}

Hash128 combine_state_hash(const std::map<std::string, Hash128>& tensor_hashes) {
  StateHasher h;
  for (const auto& [name, hash] : tensor_hashes) {
    put_u64(h, name.size());
    h.add_bytes(name.data(), name.size());
    put_u64(h, hash.high);
    put_u64(h, hash.low);
  }
  return h.finish();
}

Hash128 Int8State::state_hash() const {
  return combine_state_hash(hashes_);
}

Hash128 model_fingerprint(const Hash128& config_hash, const std::vector<TensorLayout>& tensors) {
  StateHasher h;
  static const char kTag[] = "stoa-pulse-fingerprint-v1";
  h.add_bytes(kTag, sizeof(kTag) - 1);
  put_u64(h, config_hash.high);
  put_u64(h, config_hash.low);
  for (const TensorLayout& t : tensors) {
    put_u64(h, t.name.size());
    h.add_bytes(t.name.data(), t.name.size());
    uint8_t kind = static_cast<uint8_t>(t.kind);
    h.add_bytes(&kind, 1);
    put_u64(h, t.shape.size());
    for (int64_t d : t.shape) put_u64(h, static_cast<uint64_t>(d));
  }
  return h.finish();
}

Hash128 Int8State::fingerprint() const {
  std::vector<TensorLayout> layouts;
  layouts.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) layouts.push_back({name, t.kind, t.shape});
  return model_fingerprint(config_hash_, layouts);
}

size_t Int8State::nbytes() const {
  size_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.nbytes();
  return n;
}

int64_t Int8State::numel() const {
  int64_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.numel();
  return n;
}

int64_t Int8State::int8_numel() const {
  int64_t n = 0;
  for (const auto& [name, t] : tensors_)
    if (t.kind == TensorKind::kInt8) n += t.numel();
  return n;
}

bool Int8State::verify_cached_hashes() const {
  for (const auto& [name, t] : tensors_)
    if (!(t.compute_hash() == hashes_.at(name))) return false;
  return true;
}

StateTensor& StateEditor::tensor(const std::string& name) {
  auto it = state_.tensors_.find(name);
  STOA_CHECK(it != state_.tensors_.end(), ErrorKind::kNotFound, "int8 state has no tensor '", name,
             "'");
  return it->second;
}

void StateEditor::rehash(const std::string& name) {
  state_.hashes_.at(name) = tensor(name).compute_hash();
}

}  // namespace stoa::pulse
