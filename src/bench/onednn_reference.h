#pragma once
// oneDNN's bf16 matmul on the shapes the bench times, printed as a reference for eaglet's kernels; the engine never
// uses it. Compiled in only when CMake found Debian's libdnnl-dev (EAGLET_HAVE_DNNL); without it, create() says so.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/matmul.h"

namespace eaglet::bench {

class OnednnReference {
 public:
  virtual ~OnednnReference() = default;
  // y_i[M, rows_i] = x[M, cols_i] · W_iᵀ for every bf16 matrix, x already rounded to bf16 (row-major, cols_i wide).
  virtual void run(const uint16_t* x) = 0;
  virtual std::string implementation()
      const = 0;  // oneDNN's name for the kernel it chose ("brg:avx512_core_bf16", ...)
  // Primitives for M rows and the weights in oneDNN's preferred layout (reordered once, here); nullptr with *why_not
  // set when oneDNN was not built in.
  static std::unique_ptr<OnednnReference> create(const std::vector<WeightMatrix>& weights, int64_t M,
                                                 std::string* why_not);
};

}  // namespace eaglet::bench
