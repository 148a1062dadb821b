// Whether this test binary was built under a sanitizer (the asan and tsan presets), and so the
// `stoa` binary of the same tree too. ASan and TSan keep shadow memory beside every allocation and
// thread (TSan several times the heap), so a bound on peak RSS says nothing there: the memory tests
// skip their bounds in such a tree and measure them in the release one.
#pragma once

namespace stoa::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizerShadowsMemory = true;
#else
inline constexpr bool kSanitizerShadowsMemory = false;
#endif

inline constexpr const char* kNoMemoryBoundsUnderSanitizer =
    "a sanitizer's shadow memory inflates peak RSS: memory bounds are measured in the release tree";

}  // namespace stoa::testing
