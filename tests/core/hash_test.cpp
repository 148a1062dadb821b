#include <gtest/gtest.h>

#include <cstring>

#include "core/hash.h"

namespace stoa {
namespace {

TEST(Hash, KnownXxh3_128Vectors) {
  // Reference digests from xxhsum -H2 (xxHash 0.8): empty input and "abc".
  EXPECT_EQ(hash_bytes("", 0).hex(), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(hash_bytes("abc", 3).hex(), "06b05ab6733a618578af5f94892f3950");
}

TEST(Hash, HexRoundTripAndRejectsGarbage) {
  Hash128 h = hash_bytes("stoa", 4);
  Hash128 parsed;
  ASSERT_TRUE(Hash128::parse(h.hex(), &parsed));
  EXPECT_EQ(parsed, h);
  EXPECT_FALSE(Hash128::parse("xyz", &parsed));
  EXPECT_FALSE(Hash128::parse(std::string(32, 'G'), &parsed));
}

TEST(Hash, StateHashSeesNamesShapesAndBytes) {
  Tensor a = Tensor::from_f32({2, 2}, std::vector<float>{1, 2, 3, 4});
  auto state_of = [](const char* name, const Tensor& t) {
    StateHasher h;
    h.add(name, t.view());
    return h.finish();
  };
  Hash128 base = state_of("w", a);
  EXPECT_EQ(base, state_of("w", a));
  EXPECT_NE(base, state_of("v", a));
  Tensor b = a.clone();
  b.reshape({4, 1});
  EXPECT_NE(base, state_of("w", b));
  Tensor c = a.clone();
  c.as<float>()[3] = 4.0000005f;
  EXPECT_NE(base, state_of("w", c));
}

}  // namespace
}  // namespace stoa
