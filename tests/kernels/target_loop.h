// Runs a test body once per SIMD target the kernels were compiled for and this CPU supports
// (on an AVX-512 machine: AVX3_DL, AVX3, AVX2, SSE4 and the scalar fallback; on 64-bit ARM:
// NEON, once per int8 dot-product variant the CPU has — see kernels/matmul_int8_arm.h).
#pragma once
#include <gtest/gtest.h>

#include <functional>

namespace stoa::kernels::test {

void for_each_target(const std::function<void()>& body);

}  // namespace stoa::kernels::test
