// BigVector<T>: a std::vector whose large buffers are backed by transparent huge pages.
//
// `report` keeps a trace's evidence in memory until the end (tens of millions of records), in
// vectors that grow by doubling. With 4 KiB pages every new buffer is faulted in page by page
// and every old one unmapped: on a 6M-record trace the kernel's page-fault path was ~30% of the
// analysis CPU time. Buffers of 2 MiB and more are mapped here with MADV_HUGEPAGE (the kernel's
// THP mode is usually "madvise"), so they fault in 2 MiB at a time; small buffers use malloc.
// Where THP is off the madvise is a no-op and this is plain mmap, no worse than malloc's.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace ld::util {

template <class T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr size_t kHuge = size_t{2} << 20;

  HugePageAllocator() noexcept = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  static size_t mapped_bytes(size_t bytes) { return (bytes + kHuge - 1) / kHuge * kHuge; }

  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (bytes < kHuge) {
      void* p = std::malloc(bytes ? bytes : 1);
      if (!p) throw std::bad_alloc();
      return static_cast<T*>(p);
    }
    // Over-map by one huge page so that the buffer can start on a 2 MiB boundary (THP needs
    // aligned 2 MiB ranges); the slack before and after is unmapped at once.
    const size_t len = mapped_bytes(bytes);
    void* raw = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    auto base = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (base + kHuge - 1) & ~(uintptr_t{kHuge} - 1);
    if (aligned > base) munmap(raw, aligned - base);
    const uintptr_t end = base + len + kHuge;
    if (end > aligned + len) munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
    madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);
    return reinterpret_cast<T*>(aligned);
  }

  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHuge)
      std::free(p);
    else
      munmap(p, mapped_bytes(bytes));
  }

  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

template <class T>
using BigVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace ld::util
