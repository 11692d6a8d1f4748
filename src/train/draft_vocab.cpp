#include "train/draft_vocab.h"

#include <algorithm>
#include <numeric>

#include "io/safetensors.h"
#include "util/error.h"

namespace eaglet {

std::vector<int32_t> DraftVocab::target_ids() const {
  std::vector<int32_t> ids(d2t.size());
  for (size_t i = 0; i < d2t.size(); ++i) ids[i] = static_cast<int32_t>(static_cast<int64_t>(i) + d2t[i]);
  return ids;
}

DraftVocab build_draft_vocab(const std::vector<int64_t>& counts, int64_t n) {
  const int64_t V = static_cast<int64_t>(counts.size());
  if (n < 1 || n > V) fail("draft vocabulary: size ", n, " must be in [1, target vocab ", V, "]");
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  // Most frequent first; ties (and the never-seen ids that pad a small corpus) by ascending id.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return counts[static_cast<size_t>(a)] > counts[static_cast<size_t>(b)];
  });
  std::vector<int32_t> chosen(order.begin(), order.begin() + n);
  std::sort(chosen.begin(), chosen.end());
  DraftVocab v;
  v.counts = counts;
  v.t2d.assign(static_cast<size_t>(V), 0);
  int64_t total = 0, covered = 0;
  for (int64_t c : counts) {
    total += c;
    v.distinct += c > 0;
  }
  for (size_t i = 0; i < chosen.size(); ++i) {
    v.d2t.push_back(chosen[i] - static_cast<int64_t>(i));
    v.t2d[static_cast<size_t>(chosen[i])] = 1;
    covered += counts[static_cast<size_t>(chosen[i])];
  }
  v.coverage = total > 0 ? static_cast<double>(covered) / static_cast<double>(total) : 0.0;
  return v;
}

void write_draft_vocab(const std::string& path, const DraftVocab& v) {
  const int64_t n = static_cast<int64_t>(v.d2t.size()), V = static_cast<int64_t>(v.t2d.size());
  write_safetensors(path,
                    {{"d2t", DType::I64, {n}, v.d2t.data()},
                     {"t2d", DType::BOOL, {V}, v.t2d.data()},
                     {"token_counts", DType::I64, {V}, v.counts.data()}},
                    {{"coverage", std::to_string(v.coverage)}, {"distinct_ids", std::to_string(v.distinct)}});
}

}  // namespace eaglet
