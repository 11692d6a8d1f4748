#include "kernels/bf16_panels.h"

#include <sys/mman.h>

#include <cstddef>
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
  const int64_t K = w.cols, pairs = (K + 1) / 2, ld = w.row_stride();
  const auto* src = static_cast<const uint16_t*>(w.data);
  for (int64_t p = 0; p < panel_count(w.rows); ++p) {
    const uint16_t* rows[kPanelRows];  // null: a padding row past the matrix's end
    for (int64_t r = 0; r < kPanelRows; ++r)
      rows[r] = p * kPanelRows + r < w.rows ? src + (p * kPanelRows + r) * ld : nullptr;
    uint16_t* line = out + p * panel_elements(K);
    for (int64_t k2 = 0; k2 < pairs; ++k2, line += 2 * kPanelRows)  // written in order, read along 16 rows
      for (int64_t r = 0; r < kPanelRows; ++r) {
        const bool whole = 2 * k2 + 1 < K;
        line[2 * r] = rows[r] ? rows[r][2 * k2] : 0;
        line[2 * r + 1] = rows[r] && whole ? rows[r][2 * k2 + 1] : 0;
      }
  }
}

namespace {
// The kernel may reclaim the rows' pages first: the forward reads the panels now (a model twice its size in memory
// would otherwise push out what is in use). A hint only: the rows stay readable (embeddings, export), at worst
// from the file again.
void release_hint(const WeightMatrix& w) {
#ifdef MADV_COLD
  const uintptr_t page = 4096, begin = reinterpret_cast<uintptr_t>(w.data);
  const uintptr_t end = begin + static_cast<uintptr_t>(((w.rows - 1) * w.row_stride() + w.cols) * 2);
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_COLD);
#else
  (void)w;
#endif
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
      pack_panels(*w, reinterpret_cast<uint16_t*>(at));
      w->panels = reinterpret_cast<const uint16_t*>(at);
      at += panel_bytes(*w);
      release_hint(*w);
    }
  bytes_ += static_cast<int64_t>(total);
}

}  // namespace eaglet
