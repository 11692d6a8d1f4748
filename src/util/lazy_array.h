#pragma once
// Zeroed memory that the OS commits page by page as it is first written: a KV cache sized for a whole context costs
// only what its tokens use, and making one writes nothing (a std::vector would zero, and so commit, all of it at
// once). Reserved with MAP_NORESERVE, so the kernel's overcommit heuristic does not refuse a large reservation.
#include <cstddef>
#include <cstdint>

namespace eaglet {

class LazyBytes {
 public:
  LazyBytes() = default;
  explicit LazyBytes(size_t bytes);  // throws an Error naming the size when the address space is not available
  ~LazyBytes();
  LazyBytes(LazyBytes&& other) noexcept;
  LazyBytes& operator=(LazyBytes&& other) noexcept;
  LazyBytes(const LazyBytes& other);  // copies every byte: the copy's pages are all committed
  LazyBytes& operator=(const LazyBytes& other);

  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

template <typename T>
class LazyArray {
 public:
  LazyArray() = default;
  explicit LazyArray(size_t n) : bytes_(n * sizeof(T)), size_(n) {}
  T* data() { return static_cast<T*>(bytes_.data()); }
  const T* data() const { return static_cast<const T*>(bytes_.data()); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  size_t size() const { return size_; }

 private:
  LazyBytes bytes_;
  size_t size_ = 0;
};

}  // namespace eaglet
