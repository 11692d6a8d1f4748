#include "util/lazy_array.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "util/error.h"

namespace eaglet {

LazyBytes::LazyBytes(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    fail("cannot reserve ", static_cast<double>(bytes) / 1e9, " GB of address space (", std::strerror(errno),
         "): lower the context (-c)");
  data_ = p;
}

LazyBytes::~LazyBytes() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

LazyBytes::LazyBytes(LazyBytes&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

LazyBytes& LazyBytes::operator=(LazyBytes&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

LazyBytes::LazyBytes(const LazyBytes& other) : LazyBytes(other.bytes_) {
  if (bytes_ > 0) std::memcpy(data_, other.data_, bytes_);
}

LazyBytes& LazyBytes::operator=(const LazyBytes& other) {
  if (this != &other) *this = LazyBytes(other);
  return *this;
}

}  // namespace eaglet
