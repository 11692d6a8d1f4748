#pragma once
// Activation buffers grow to the largest batch seen and are then reused: no allocation per token.
#include <cstdint>
#include <vector>

namespace eaglet {

template <typename T>
void grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

}  // namespace eaglet
