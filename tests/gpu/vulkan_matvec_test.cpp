// The Vulkan Q8_0 matvec (gpu/vulkan/q8_matvec.h, shaders/q8_matvec.comp) equals engine
// arithmetic v2's scalar reference (kernels::v2::matvec_q8) bit for bit: several shapes and
// batches, random int8 weights with f16 scales (f16 subnormals and negative scales among them),
// zero and tiny activation blocks, and the special values (a NaN-producing scale, all-zero rows).
// On whichever Vulkan device the loader offers (gpu/vulkan_device.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu/vulkan/context.h"
#include "gpu/vulkan/q8_matvec.h"
#include "gpu/vulkan/q8_quantize.h"
#include "gpu/vulkan_device.h"
#include "kernels/arith_v2.h"
#include "kernels/arith_v2_test_util.h"
#include "kernels/half.h"

namespace stoa::gpu::vulkan {
namespace {

class VulkanMatvec : public VulkanDeviceTest {
 protected:
  // Runs the shader and the reference on m and counts the outputs whose bits differ.
  static size_t mismatches(Q8Matvec& mv, const kernels::RandomQ8& m, std::vector<float>* gpu) {
    const DeviceQ8Matrix dm = mv.upload(m.weights());
    std::vector<float> want(static_cast<size_t>(m.batch * m.rows));
    gpu->assign(want.size(), -1.0f);
    kernels::v2::matvec_q8(m.weights(), m.acts(), want.data(), m.rows);
    mv.run(dm, m.acts(), gpu->data(), m.rows);
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (kernels::bits_of(want[i]) != kernels::bits_of((*gpu)[i])) {
        if (differ < 5)
          std::printf("  output %zu: reference %a (0x%08x), device %a (0x%08x)\n", i, want[i],
                      kernels::bits_of(want[i]), (*gpu)[i], kernels::bits_of((*gpu)[i]));
        ++differ;
      }
    }
    return differ;
  }
};

TEST_F(VulkanMatvec, EqualsTheV2ReferenceBitForBit) {
  Q8Matvec mv(*device());
  std::mt19937_64 rng(54);
  struct Shape {
    int64_t rows, cols, batch;
  };
  for (const Shape s : {Shape{1, 32, 1}, Shape{7, 64, 1}, Shape{64, 256, 3}, Shape{65, 96, 2},
                        Shape{33, 1024, 2}, Shape{130, 4096, 1}, Shape{300, 2048, 4}}) {
    for (int rep = 0; rep < 2; ++rep) {
      const kernels::RandomQ8 m = kernels::random_q8(rng, s.rows, s.cols, s.batch);
      std::vector<float> y;
      EXPECT_EQ(mismatches(mv, m, &y), 0u)
          << s.rows << " x " << s.cols << " batch " << s.batch << " rep " << rep;
    }
  }
}

TEST_F(VulkanMatvec, SpecialValuesMatchTheReference) {
  Q8Matvec mv(*device());
  std::mt19937_64 rng(55);
  kernels::RandomQ8 m = kernels::random_q8(rng, 6, 128, 2);
  const int64_t groups = m.cols / 32;
  m.ws[0 * groups + 1] = 0x7c00u;  // +inf scale: inf * isum, and inf * 0 = NaN where isum = 0
  std::fill(m.wq.begin() + 0 * m.cols + 32, m.wq.begin() + 0 * m.cols + 64, int8_t{0});
  m.ws[1 * groups + 2] = 0xfc00u;  // -inf scale with nonzero products: -inf or +inf
  m.ws[2 * groups + 0] = 0x7e01u;  // a NaN scale with a payload: canonical NaN out
  for (int64_t g = 0; g < groups; ++g) m.ws[3 * groups + g] = 0x8000u;  // -0 scales: +0 out
  for (int64_t g = 0; g < groups; ++g) m.ws[4 * groups + g] = 0x0001u;  // the smallest f16
  std::vector<float> y;
  EXPECT_EQ(mismatches(mv, m, &y), 0u);
  EXPECT_EQ(kernels::bits_of(y[0]), kernels::v2::kCanonicalNanBits);
  EXPECT_EQ(kernels::bits_of(y[2]), kernels::v2::kCanonicalNanBits);
  EXPECT_EQ(kernels::bits_of(y[3]), 0u);
}

// The activations quantised on the device equal kernels::v2::quantize_q8's (values, f16-rounded
// scales and block sums, bit for bit), including zero blocks, tiny blocks (a scale that flushes
// to zero), denormal values and a block with a NaN and one with an infinity; and quantise-then-
// multiply on the device equals the same chain on the host.
TEST_F(VulkanMatvec, QuantizeAndMatvecChainEqualsTheReference) {
  Q8Quantize quantize(*device());
  Q8Matvec mv(*device());
  std::mt19937_64 rng(56);
  for (const int64_t cols : {int64_t{32}, int64_t{256}, int64_t{2048}}) {
    kernels::RandomQ8 m = kernels::random_q8(rng, 40, cols, 3);
    m.x[0] = kernels::float_of(0x80000007u);  // a denormal
    if (cols >= 256) {
      m.x[64] = std::numeric_limits<float>::quiet_NaN();
      m.x[cols + 100] = -std::numeric_limits<float>::infinity();
      for (int i = 0; i < 32; ++i) m.x[2 * cols + 32 + i] = std::ldexp(1.0f, -130) * (i - 16);
    }
    // The reference: kernels::v2 on the host.
    kernels::v2::quantize_q8(m.x.data(), cols, m.acts());
    std::vector<float> want(static_cast<size_t>(m.batch * m.rows));
    kernels::v2::matvec_q8(m.weights(), m.acts(), want.data(), m.rows);
    // The device: its own quantisation, then its matvec.
    std::vector<int8_t> q(m.xq.size());
    std::vector<float> d(m.xd.size());
    std::vector<int32_t> sums(m.xsums.size());
    const kernels::Q8Activations acts{q.data(), d.data(), m.batch, cols, sums.data()};
    quantize.run(m.x.data(), cols, acts);
    EXPECT_EQ(q, m.xq) << cols;
    EXPECT_EQ(0, std::memcmp(d.data(), m.xd.data(), d.size() * sizeof(float))) << cols;
    EXPECT_EQ(sums, m.xsums) << cols;
    std::vector<float> got(want.size());
    mv.run(mv.upload(m.weights()), acts, got.data(), m.rows);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << cols;
  }
}

}  // namespace
}  // namespace stoa::gpu::vulkan
