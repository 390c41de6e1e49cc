// BigVector<T>: a growable array of trivially copyable records for lists that reach millions.
//
// `report` keeps a trace's evidence in memory until the end, in lists that grow one record at a
// time to hundreds of MiB. A std::vector grows by allocating twice the size, copying and freeing:
// every element is copied again and the kernel hands out (and zeroes) twice the final memory,
// which on a 30M-record trace was a third of the analysis time (clear_page in the fault path).
// This grows with realloc instead: glibc serves large blocks with mmap and grows them with
// mremap, which moves page tables, not bytes, so each page is faulted in and zeroed once. Large
// buffers also ask for transparent huge pages (the usual THP mode is "madvise"): one fault per
// 2 MiB instead of per 4 KiB.
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
  ~BigVector() { std::free(data_); }

  void swap(BigVector& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
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

  void resize_buffer(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    void* p = std::realloc(data_, n * sizeof(T));
    if (!p) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
    capacity_ = n;
    const size_t bytes = n * sizeof(T);
    if (bytes >= 2 * kHugePage) {
      // The whole 2 MiB pages inside the buffer; a no-op where THP is off.
      const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
      const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(uintptr_t{kHugePage} - 1);
      if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
    }
  }

  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace ld::util
