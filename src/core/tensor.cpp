#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

namespace stoa {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

void Tensor::AlignedFree::operator()(void* p) const {
  std::free(p);
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_) {
    STOA_CHECK(d >= 0, ErrorKind::kInvalidArgument, "negative dimension in shape ",
               shape_string(shape_));
  }
  size_t bytes = nbytes();
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p)
    fail(ErrorKind::kIo, "out of memory allocating ", rounded, " bytes for tensor ",
         shape_string(shape_));
  std::memset(p, 0, rounded);
  storage_.reset(p);
}

Tensor Tensor::from_f32(Shape shape, std::span<const float> values) {
  Tensor t(DType::kF32, std::move(shape));
  STOA_CHECK(static_cast<int64_t>(values.size()) == t.numel(), ErrorKind::kInvalidArgument,
             "from_f32: ", values.size(), " values for shape ", shape_string(t.shape()));
  std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.data(), data(), nbytes());
  return t;
}

void Tensor::reshape(Shape shape) {
  STOA_CHECK(shape_numel(shape) == numel(), ErrorKind::kInvalidArgument, "reshape ",
             shape_string(shape_), " -> ", shape_string(shape), " changes the element count");
  shape_ = std::move(shape);
}

Tensor to_f32(const TensorView& view) {
  STOA_CHECK(view.is_contiguous(), ErrorKind::kInvalidArgument, "to_f32 needs a contiguous view");
  Tensor out(DType::kF32, view.shape);
  size_t n = static_cast<size_t>(view.numel());
  switch (view.dtype) {
    case DType::kF32:
      std::memcpy(out.data(), view.data, n * 4);
      break;
    case DType::kBF16:
      convert_bf16_to_f32(view.as<const uint16_t>(), out.as<float>(), n);
      break;
    case DType::kF16:
      convert_f16_to_f32(view.as<const uint16_t>(), out.as<float>(), n);
      break;
    default:
      fail(ErrorKind::kUnsupported, "to_f32: cannot convert ", dtype_name(view.dtype));
  }
  return out;
}

Tensor convert_float(const TensorView& view, DType dtype) {
  STOA_CHECK(view.dtype == DType::kF32 && view.is_contiguous(), ErrorKind::kInvalidArgument,
             "convert_float needs a contiguous f32 view");
  Tensor out(dtype, view.shape);
  size_t n = static_cast<size_t>(view.numel());
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out.data(), view.data, n * 4);
      break;
    case DType::kBF16:
      convert_f32_to_bf16(view.as<const float>(), out.as<uint16_t>(), n);
      break;
    case DType::kF16:
      convert_f32_to_f16(view.as<const float>(), out.as<uint16_t>(), n);
      break;
    default:
      fail(ErrorKind::kUnsupported, "convert_float: cannot convert to ", dtype_name(dtype));
  }
  return out;
}

}  // namespace stoa
