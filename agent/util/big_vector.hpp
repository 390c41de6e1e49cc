// BigVector<T>: a growable array of trivially copyable records for lists that reach millions.
//
// `report` keeps a trace's evidence in memory until the end, in lists that grow one record at a
// time to hundreds of MiB. A std::vector grows by allocating twice the size, copying and freeing:
// every element is copied again and the kernel hands out (and zeroes) twice the final memory,
// which on a 30M-record trace was a third of the analysis time (clear_page in the fault path).
// This grows in place instead: small lists use malloc/realloc, and a list past 256 KiB gets
// an anonymous mapping of its own, grown with mremap, which moves page tables, not bytes, so
// each page is faulted in and zeroed once. Not glibc's realloc: its mmap threshold rises (up to
// 32 MiB) each time a large block is freed, after which large lists live on the heap and every
// growth is malloc + memcpy + free again (measured: a fifth of `report`'s time in page faults
// under memcpy). Mappings ask for transparent huge pages (the usual THP mode is "madvise"):
// one fault per 2 MiB instead of per 4 KiB.
//
// Iterators are plain pointers; the interface is the part of std::vector the analysis uses.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <utility>

namespace ld::util {

template <class T>
class BigVector {
  static_assert(std::is_trivially_copyable_v<T>, "BigVector moves its elements with realloc");

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;
  using size_type = size_t;

  BigVector() = default;
  BigVector(std::initializer_list<T> items) {
    reserve(items.size());
    for (const T& item : items) push_back(item);
  }
  BigVector(const BigVector& other) { *this = other; }
  BigVector(BigVector&& other) noexcept { swap(other); }
  BigVector& operator=(const BigVector& other) {
    if (this != &other) {
      clear();
      reserve(other.size_);
      if (other.size_) std::memcpy(static_cast<void*>(data_), other.data_, other.size_ * sizeof(T));
      size_ = other.size_;
    }
    return *this;
  }
  BigVector& operator=(BigVector&& other) noexcept {
    BigVector(std::move(other)).swap(*this);
    return *this;
  }
  ~BigVector() { release(); }

  void swap(BigVector& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
    std::swap(mapped_bytes_, other.mapped_bytes_);
  }

  void push_back(const T& item) {
    if (size_ == capacity_) {
      const T copy = item;  // `item` may live in the buffer that grow() moves
      grow(size_ + 1);
      data_[size_++] = copy;
      return;
    }
    data_[size_++] = item;
  }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    push_back(T{std::forward<Args>(args)...});
    return back();
  }
  void reserve(size_t n) {
    if (n > capacity_) resize_buffer(n);
  }
  void clear() noexcept { size_ = 0; }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return capacity_; }
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  T& operator[](size_t i) noexcept { return data_[i]; }
  const T& operator[](size_t i) const noexcept { return data_[i]; }
  T& front() noexcept { return data_[0]; }
  const T& front() const noexcept { return data_[0]; }
  T& back() noexcept { return data_[size_ - 1]; }
  const T& back() const noexcept { return data_[size_ - 1]; }
  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;

  void grow(size_t needed) {
    // 1.5x: realloc keeps the old pages, so a smaller step costs only more mremap calls.
    size_t next = capacity_ < 16 ? 16 : capacity_ + capacity_ / 2;
    resize_buffer(next < needed ? needed : next);
  }

  static constexpr size_t kMapFrom = size_t{256} << 10;  // bytes: smaller lists use malloc

  static size_t round_up(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

  void resize_buffer(size_t n) {
    if (n > SIZE_MAX / sizeof(T) / 2) throw std::bad_alloc();
    const size_t bytes = n * sizeof(T);
    if (bytes < kMapFrom && mapped_bytes_ == 0) {
      void* p = std::realloc(data_, bytes);
      if (!p) throw std::bad_alloc();
      data_ = static_cast<T*>(p);
      capacity_ = n;
      return;
    }
    // Whole huge pages past 2 MiB, so that the last one can be a huge page too.
    const size_t map_bytes = round_up(bytes, bytes >= kHugePage ? kHugePage : page_size());
    void* p;
    if (mapped_bytes_ == 0) {
      p = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      // Before the first touch; mremap keeps the advice with the mapping.
      ::madvise(p, map_bytes, MADV_HUGEPAGE);
      if (size_) std::memcpy(p, static_cast<const void*>(data_), size_ * sizeof(T));
      std::free(data_);
    } else {
      p = ::mremap(static_cast<void*>(data_), mapped_bytes_, map_bytes, MREMAP_MAYMOVE);
      if (p == MAP_FAILED) throw std::bad_alloc();
    }
    data_ = static_cast<T*>(p);
    mapped_bytes_ = map_bytes;
    capacity_ = map_bytes / sizeof(T);
  }

  void release() noexcept {
    if (mapped_bytes_) ::munmap(static_cast<void*>(data_), mapped_bytes_);
    else std::free(data_);
    data_ = nullptr;
    size_ = capacity_ = mapped_bytes_ = 0;
  }

  static size_t page_size() {
    static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    return size;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  size_t mapped_bytes_ = 0;  // 0: data_ is malloc'd (or null)
};

}  // namespace ld::util
