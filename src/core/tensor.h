// Tensors: a non-owning view (TensorView) and an owning, 64-byte aligned buffer (Tensor).
// Row-major; strides are in elements. Both carry their dtype so IO and hashing never guess.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace stoa {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "[3, 4]"
Shape contiguous_strides(const Shape& shape);

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Shape strides;  // elements

  TensorView() = default;
  TensorView(void* data_, DType dtype_, Shape shape_)
      : data(data_), dtype(dtype_), shape(std::move(shape_)), strides(contiguous_strides(shape)) {}

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t dim(size_t i) const { return shape.at(i); }
  size_t rank() const { return shape.size(); }
  bool is_contiguous() const { return strides == contiguous_strides(shape); }

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(data); }
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled
  static Tensor zeros(DType dtype, Shape shape) { return Tensor(dtype, std::move(shape)); }
  static Tensor from_f32(Shape shape, std::span<const float> values);

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;  // copies are explicit: clone()
  Tensor& operator=(const Tensor&) = delete;
  Tensor clone() const;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool empty() const { return !storage_; }

  void* data() { return storage_.get(); }
  const void* data() const { return storage_.get(); }
  template <typename T>
  T* as() {
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data());
  }
  TensorView view() const { return TensorView(const_cast<void*>(data()), dtype_, shape_); }

  // Reinterprets the same bytes with another shape of equal element count.
  void reshape(Shape shape);

 private:
  struct AlignedFree {
    void operator()(void* p) const;
  };
  DType dtype_ = DType::kF32;
  Shape shape_;
  std::unique_ptr<void, AlignedFree> storage_;
};

// Converts any float view (f32/bf16/f16) to a new f32 tensor.
Tensor to_f32(const TensorView& view);
// Converts an f32 tensor to f32/bf16/f16 (round to nearest even).
Tensor convert_float(const TensorView& view, DType dtype);

}  // namespace stoa
