// Internal: the argument bundles the int8 matmul entry points hand to their per-target
// implementations (shared by every target compiled from matmul_int8.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

namespace stoa::kernels {

struct Args32 {
  const int8_t* w;
  const uint16_t* ws;
  size_t cols;
  const float* x;
  size_t x_stride;
  float* y;
  size_t y_stride;
};

struct Args8 {
  const int8_t* w;
  const uint16_t* ws;
  size_t cols;
  const int8_t* xq;  // batch * cols, row stride cols
  const float* xd;   // batch * cols / 32
  float* y;
  size_t y_stride;
};

}  // namespace stoa::kernels
