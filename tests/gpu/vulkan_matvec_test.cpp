// The Vulkan Q8_0 matvec (gpu/vulkan/q8_matvec.h, shaders/q8_matvec.comp) equals engine
// arithmetic v2's scalar reference (kernels::v2::matvec_q8) bit for bit: several shapes and
// batches, random int8 weights with f16 scales (f16 subnormals and negative scales among them),
// zero and tiny activation blocks, and the special values (a NaN-producing scale, all-zero rows).
// On whichever Vulkan device the loader offers (gpu/vulkan_device.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu/vulkan/context.h"
#include "gpu/vulkan/q8_matvec.h"
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

}  // namespace
}  // namespace stoa::gpu::vulkan
