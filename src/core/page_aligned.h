// Storage in whole, aligned pages: the engine's int8 grid lives in it so a unified-memory device
// can import the very pages the host writes (VK_EXT_external_memory_host needs the pointer and
// the size aligned to minImportedHostPointerAlignment, a page on the drivers that offer it), and
// the weights exist once (docs/design/gpu.md, "Memory"). The contents are the same bits as in
// any other vector; only where they start and how much the allocation rounds up to differ.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace stoa {

// Every allocation below starts on this boundary and spans a whole multiple of it: 16 KiB, the
// largest page of the hosts we run on (Apple silicon; x86 and most ARM Linux use 4 KiB), so an
// import whose alignment is any of these pages covers it.
inline constexpr size_t kHostPageAlignment = 16384;

inline size_t round_up_to_pages(size_t bytes) {
  return (bytes + kHostPageAlignment - 1) / kHostPageAlignment * kHostPageAlignment;
}

template <class T>
struct PageAlignedAllocator {
  using value_type = T;
  PageAlignedAllocator() = default;
  template <class U>
  PageAlignedAllocator(const PageAlignedAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    return static_cast<T*>(
        ::operator new(round_up_to_pages(n * sizeof(T)), std::align_val_t(kHostPageAlignment)));
  }
  void deallocate(T* p, size_t) noexcept {
    ::operator delete(p, std::align_val_t(kHostPageAlignment));
  }

  template <class U>
  bool operator==(const PageAlignedAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using PageVector = std::vector<T, PageAlignedAllocator<T>>;

}  // namespace stoa
