#pragma once
// A batch of M activation rows split into groups of at most `max_rows` rows, as even as possible (12 rows in groups
// of up to 9: 6 + 6), the larger groups first: every group of a tile passes over the same weights, the first from
// memory and the later ones from cache.
#include <algorithm>
#include <cstdint>

namespace eaglet::detail {

struct RowGroups {
  int64_t count = 0;  // groups
  int small = 0;      // rows of a small group
  int big = 0;        // groups with one row more
  RowGroups(int64_t M, int max_rows)
      : count((M + max_rows - 1) / max_rows),
        small(count > 0 ? static_cast<int>(M / count) : 0),
        big(count > 0 ? static_cast<int>(M % count) : 0) {}
  int rows(int64_t g) const { return small + (g < big ? 1 : 0); }
  int64_t first(int64_t g) const { return g * small + std::min<int64_t>(g, big); }
  int largest() const { return big > 0 ? small + 1 : small; }
};

}  // namespace eaglet::detail
