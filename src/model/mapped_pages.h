// Handing a read-only file mapping's pages back once a tensor has been read from them: pages of
// a file mapping count in the process's resident set while mapped in, so a reader that walks a
// whole checkpoint through its mapping would end with the whole file resident. The page cache
// keeps them (a re-read is cheap); only this process's share goes.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace stoa {

// Only whole pages inside [begin, begin + size) are released: a neighbouring tensor sharing a
// boundary page keeps it. Never written pages of a MAP_PRIVATE mapping read back as the file.
inline void release_mapped_pages(const void* begin, size_t size) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t from = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  uintptr_t to = (reinterpret_cast<uintptr_t>(begin) + size) / page * page;
  if (to > from) madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

}  // namespace stoa
