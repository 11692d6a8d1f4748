#include "kernels/panel_store.h"

#include <sys/mman.h>

#include <cstddef>
#include <new>

#include "kernels/bf16_panels.h"
#include "kernels/int_panels.h"
#include "util/thread_pool.h"

namespace eaglet {

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

// Bytes of w's panels, 0 where it gets none (a multiple of 64).
size_t panel_bytes(const WeightMatrix& w) {
  if (w.panels != nullptr) return 0;
  if (panels_help(w)) return static_cast<size_t>(panel_count(w.rows) * panel_elements(w.cols)) * sizeof(uint16_t);
  if (int_panels_help(w)) return static_cast<size_t>(int_panel_bytes(w));
  return 0;
}

// Hints about the pages of w's rows (whole pages inside them; a failure changes nothing). Before packing,
// kPopulateRead maps them in one call instead of a fault per 4 KB page (faults are slow on virtual machines). After,
// kCold lets the kernel reclaim them first, as the forward reads the panels (a model twice its size in memory would
// otherwise push out what is in use); the rows stay readable (embeddings, export), at worst from the file again.
void advise_rows(const WeightMatrix& w, int advice) {
  if (advice < 0) return;
  const size_t bytes = w.quantized() ? w.nbytes() : static_cast<size_t>((w.rows - 1) * w.row_stride() + w.cols) * 2;
  const uintptr_t page = 4096, begin = reinterpret_cast<uintptr_t>(w.data), end = begin + bytes;
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, advice);
}
}  // namespace

void PanelStore::Unmap::operator()(void* p) const { munmap(p, bytes); }

void PanelStore::pack(std::span<WeightMatrix* const> matrices, ThreadPool* pool) {
  constexpr size_t kHugePage = size_t{2} << 20;
  size_t total = 0;
  for (const WeightMatrix* w : matrices) total += panel_bytes(*w);
  if (total == 0) return;
  // One mapping, aligned to 2 MB so that its pages can be huge ones: a first touch of fresh 4 KB pages (one fault
  // each) ran at 0.3 GB/s on a virtual machine, of 2 MB pages at 0.5-12 GB/s.
  const size_t bytes = total + kHugePage;
  void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) throw std::bad_alloc();
  mappings_.push_back(std::unique_ptr<void, Unmap>(map, Unmap{bytes}));
  auto* at = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(map) + kHugePage - 1) / kHugePage * kHugePage);
  madvise(at, total, MADV_HUGEPAGE);
  for (WeightMatrix* w : matrices) {
    const size_t n = panel_bytes(*w);
    if (n == 0) continue;
    advise_rows(*w, kPopulateRead);
    const auto pack_range = [&](size_t p0, size_t p1, int) {
      if (w->quantized())
        pack_int_panels(*w, reinterpret_cast<uint8_t*>(at), static_cast<int64_t>(p0), static_cast<int64_t>(p1));
      else
        pack_panels(*w, reinterpret_cast<uint16_t*>(at), static_cast<int64_t>(p0), static_cast<int64_t>(p1));
    };
    const size_t panels = static_cast<size_t>(panel_count(w->rows));
    if (pool != nullptr)
      pool->parallel_for(panels, pack_range, 16);
    else
      pack_range(0, panels, 0);
    w->panels = at;
    at += n;
    advise_rows(*w, kCold);
  }
}

}  // namespace eaglet
