#include "kernels/bf16_panels.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>

#include "kernels/cpu_features.h"

namespace eaglet {

int64_t panel_count(int64_t rows) { return (rows + kPanelRows - 1) / kPanelRows; }
int64_t panel_elements(int64_t cols) { return (cols + 1) / 2 * 2 * kPanelRows; }

bool panels_help(const WeightMatrix& w) {
  return active_isa() == Isa::Avx512Bf16 && w.data != nullptr && !w.quantized() && w.dtype == DType::BF16 &&
         w.rows > 0 && w.cols > 0;
}

void pack_panels(const WeightMatrix& w, uint16_t* out) {
  const int64_t K = w.cols, whole_pairs = K / 2, ld = w.row_stride();
  const auto* src = static_cast<const uint16_t*>(w.data);
  for (int64_t p = 0; p < panel_count(w.rows); ++p) {
    uint16_t* panel = out + p * panel_elements(K);
    const int64_t rows = std::min(kPanelRows, w.rows - p * kPanelRows);
    if (rows < kPanelRows || K % 2 != 0)  // padding rows and the last column's partner read as 0
      std::memset(panel, 0, static_cast<size_t>(panel_elements(K)) * sizeof(uint16_t));
    for (int64_t r = 0; r < rows; ++r) {  // a row's pairs, 4 bytes each, go to lane r of consecutive lines
      const uint16_t* row = src + (p * kPanelRows + r) * ld;
      uint16_t* lane = panel + 2 * r;
      for (int64_t k2 = 0; k2 < whole_pairs; ++k2) std::memcpy(lane + k2 * 2 * kPanelRows, row + 2 * k2, 4);
      if (K % 2 != 0) lane[whole_pairs * 2 * kPanelRows] = row[K - 1];
    }
  }
}

namespace {
#ifdef MADV_POPULATE_READ
constexpr int kPopulateRead = MADV_POPULATE_READ;
#else
constexpr int kPopulateRead = -1;
#endif
#ifdef MADV_COLD
constexpr int kCold = MADV_COLD;
#else
constexpr int kCold = -1;
#endif

// Hints about the pages of w's rows (whole pages inside them; a failure changes nothing). Before packing,
// kPopulateRead maps them in one call instead of a fault per 4 KB page (faults are slow on virtual machines). After,
// kCold lets the kernel reclaim them first, as the forward reads the panels (a model twice its size in memory would
// otherwise push out what is in use); the rows stay readable (embeddings, export), at worst from the file again.
void advise_rows(const WeightMatrix& w, int advice) {
  if (advice < 0) return;
  const uintptr_t page = 4096, begin = reinterpret_cast<uintptr_t>(w.data);
  const uintptr_t end = begin + static_cast<uintptr_t>(((w.rows - 1) * w.row_stride() + w.cols) * 2);
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, advice);
}
}  // namespace

void PanelStore::Unmap::operator()(void* p) const { munmap(p, bytes); }

void PanelStore::pack(std::span<WeightMatrix* const> matrices) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const auto panel_bytes = [](const WeightMatrix& w) {
    return static_cast<size_t>(panel_count(w.rows) * panel_elements(w.cols)) * sizeof(uint16_t);
  };
  size_t total = 0;
  for (const WeightMatrix* w : matrices)
    if (panels_help(*w) && w->panels == nullptr) total += panel_bytes(*w);  // multiples of 64 bytes
  if (total == 0) return;
  // One mapping, aligned to 2 MB so that its pages can be huge ones: a first touch of fresh 4 KB pages (one fault
  // each) ran at 0.3 GB/s on a virtual machine, of 2 MB pages at 0.5-12 GB/s.
  const size_t bytes = total + kHugePage;
  void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) throw std::bad_alloc();
  mappings_.push_back(std::unique_ptr<void, Unmap>(map, Unmap{bytes}));
  auto* at = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(map) + kHugePage - 1) / kHugePage * kHugePage);
  madvise(at, total, MADV_HUGEPAGE);
  for (WeightMatrix* w : matrices)
    if (panels_help(*w) && w->panels == nullptr) {
      advise_rows(*w, kPopulateRead);
      pack_panels(*w, reinterpret_cast<uint16_t*>(at));
      w->panels = reinterpret_cast<const uint16_t*>(at);
      at += panel_bytes(*w);
      advise_rows(*w, kCold);
    }
}

}  // namespace eaglet
