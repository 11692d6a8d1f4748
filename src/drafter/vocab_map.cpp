#include "drafter/vocab_map.h"

#include <cstring>
#include <string>

#include "util/error.h"

namespace eaglet {

namespace {

std::vector<int64_t> read_integers(const TensorView& t, const std::string& file) {
  if (t.dtype != DType::I64 && t.dtype != DType::I32)
    fail(file, ": d2t must be an integer tensor (I64 offsets), found ", dtype_name(t.dtype),
         " (re-export it with torch.long)");
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype == DType::I64) {
      std::memcpy(&v[i], t.data + 8 * i, 8);
    } else {
      int32_t x;
      std::memcpy(&x, t.data + 4 * i, 4);
      v[i] = x;
    }
  }
  return v;
}

std::vector<bool> read_mask(const TensorView& t, const std::string& file) {
  std::vector<bool> m(static_cast<size_t>(t.numel()));
  const size_t width = dtype_size(t.dtype);
  if (t.dtype != DType::BOOL && t.dtype != DType::I64 && t.dtype != DType::I32)
    fail(file, ": t2d must be a BOOL tensor, found ", dtype_name(t.dtype));
  for (size_t i = 0; i < m.size(); ++i) {
    int64_t x = 0;
    std::memcpy(&x, t.data + width * i, width);
    m[i] = x != 0;
  }
  return m;
}

// The target id of draft id i for the offset d2t[i]; -1 when outside [0, target_vocab) (computed without overflow).
int64_t offset_target(size_t i, int64_t offset, int64_t target_vocab) {
  const int64_t draft_id = static_cast<int64_t>(i);
  if (offset < -draft_id || offset >= target_vocab - draft_id) return -1;
  return draft_id + offset;
}

// Target ids for a d2t read as offsets (true) or absolute ids (false); empty if that reading is invalid.
std::vector<int32_t> targets(const std::vector<int64_t>& d2t, int64_t target_vocab, bool offsets) {
  std::vector<int32_t> out(d2t.size());
  for (size_t i = 0; i < d2t.size(); ++i) {
    const int64_t t = offsets ? offset_target(i, d2t[i], target_vocab) : d2t[i];
    if (t < 0 || t >= target_vocab || (i > 0 && t <= out[i - 1])) return {};
    out[i] = static_cast<int32_t>(t);
  }
  return out;
}

bool agrees_with_t2d(const std::vector<int32_t>& target_of, const std::vector<bool>& t2d) {
  size_t marked = 0;
  for (bool b : t2d) marked += b;
  if (marked != target_of.size()) return false;
  for (int32_t t : target_of)
    if (!t2d[static_cast<size_t>(t)]) return false;
  return true;
}

}  // namespace

VocabMap VocabMap::build(const TensorView* d2t_view, const TensorView* t2d_view, int64_t draft_vocab,
                         int64_t target_vocab, const std::string& file) {
  VocabMap map;
  map.draft_vocab_ = draft_vocab;
  std::vector<bool> t2d;
  if (t2d_view != nullptr) {
    if (t2d_view->shape != std::vector<int64_t>{target_vocab})
      fail(file, ": t2d has shape ", t2d_view->shape_str(), ", expected [", target_vocab,
           "] (one flag per target token; is this drafter for another target?)");
    t2d = read_mask(*t2d_view, file);
  }
  if (d2t_view == nullptr) {
    if (draft_vocab != target_vocab)
      fail(file, ": no d2t but draft_vocab_size ", draft_vocab, " != target vocabulary ", target_vocab,
           ": a reduced draft vocabulary needs d2t to map draft ids to target ids");
    return map;
  }
  if (d2t_view->shape != std::vector<int64_t>{draft_vocab})
    fail(file, ": d2t has shape ", d2t_view->shape_str(), ", expected [", draft_vocab,
         "] (one entry per draft token = draft_vocab_size = lm_head rows)");
  const std::vector<int64_t> d2t = read_integers(*d2t_view, file);
  std::vector<int32_t> as_offsets = targets(d2t, target_vocab, true);
  const std::vector<int32_t> as_absolute = targets(d2t, target_vocab, false);
  const bool have_t2d = t2d_view != nullptr;
  const bool offsets_ok = !as_offsets.empty() && (!have_t2d || agrees_with_t2d(as_offsets, t2d));
  const bool absolute_ok = !as_absolute.empty() && (!have_t2d || agrees_with_t2d(as_absolute, t2d));
  bool all_zero = true;
  for (int64_t v : d2t) all_zero = all_zero && v == 0;
  // Absolute ids read as offsets usually overflow the vocabulary; when both readings are plausible, a strictly
  // increasing d2t is the signature of absolute ids (real offsets repeat between consecutive draft tokens).
  if (absolute_ok && !all_zero && (!offsets_ok || (!have_t2d && draft_vocab >= 16)))
    fail(file,
         ": d2t holds absolute target ids, not offsets (a known export bug): d2t[i] should be target_id - i; "
         "fix the checkpoint with d2t = d2t - arange(",
         draft_vocab, ")");
  if (as_offsets.empty()) {
    for (size_t i = 0; i < d2t.size(); ++i) {
      const int64_t t = offset_target(i, d2t[i], target_vocab);
      int64_t sum = 0;
      const bool wraps = __builtin_add_overflow(static_cast<int64_t>(i), d2t[i], &sum);
      if (t < 0)
        fail(file, ": d2t maps draft id ", i, " to target id ",
             wraps ? std::string("beyond 2^63") : std::to_string(sum), " (= ", i, " + ", d2t[i],
             "), outside the target vocabulary of ", target_vocab);
      if (i > 0 && t <= static_cast<int64_t>(i) - 1 + d2t[i - 1])
        fail(file, ": d2t target ids must be strictly increasing, but draft ids ", i - 1, " and ", i, " map to ",
             static_cast<int64_t>(i) - 1 + d2t[i - 1], " and ", t);
    }
  }
  if (!offsets_ok)
    fail(file, ": d2t and t2d disagree: the ", draft_vocab, " target ids of d2t are not exactly the ids marked in t2d");
  map.identity_ = all_zero;
  if (!all_zero) map.target_of_ = std::move(as_offsets);
  return map;
}

}  // namespace eaglet
