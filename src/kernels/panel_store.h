#pragma once
// Owns the panels of a model's matrices: bf16 weights for the AVX-512 BF16 kernel (kernels/bf16_panels.h), int8 and
// int4 ones for the AVX-512 VNNI kernel (kernels/int_panels.h), made once at load where that kernel is active.
#include <array>
#include <memory>
#include <span>
#include <vector>

#include "kernels/matmul.h"

namespace eaglet {

class ThreadPool;

// pack() gives each matrix its panels where they help (panels_help, int_panels_help) and leaves the others as they
// are; the row-major weights stay what every other reader uses (embeddings, export, quantize, the portable paths).
class PanelStore {
 public:
  // In one mapping (2 MB pages where the kernel has them); the panels split over `pool`'s threads when given.
  void pack(std::span<WeightMatrix* const> matrices, ThreadPool* pool = nullptr);
  void pack(WeightMatrix& w, ThreadPool* pool = nullptr) { pack(std::span<WeightMatrix* const>(std::array{&w}), pool); }

 private:
  struct Unmap {
    size_t bytes;
    void operator()(void* p) const;
  };
  std::vector<std::unique_ptr<void, Unmap>> mappings_;
};

}  // namespace eaglet
