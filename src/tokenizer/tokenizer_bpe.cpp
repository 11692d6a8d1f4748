#include "tokenizer/tokenizer_bpe.h"

#include <cstdio>
#include <queue>

#include "tokenizer/unicode_utf8.h"

namespace eaglet::tok {

void BpeModel::add_merge(int32_t left, int32_t right, int32_t merged, int32_t rank) {
  merges_[pair_key(left, right)] = Merge{rank, merged};
}

void BpeModel::index_byte_tokens() {
  all_bytes_present_ = true;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto id = find(name);
    byte_ids_[static_cast<size_t>(b)] = id.value_or(-1);
    if (!id) all_bytes_present_ = false;
  }
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const {
  bool last_was_unk = false;
  for (size_t pos = 0; pos < word.size();) {
    const size_t start = pos;
    unicode::next_code_point(word, pos);
    const std::string_view character = word.substr(start, pos - start);
    if (auto id = find(character)) {
      symbols.push_back(*id);
      last_was_unk = false;
      continue;
    }
    if (byte_fallback) {
      bool have_all = true;
      for (char c : character) have_all = have_all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (have_all) {
        for (char c : character) symbols.push_back(byte_ids_[static_cast<unsigned char>(c)]);
        last_was_unk = false;
        continue;
      }
    }
    // With no unk token, HF drops the character.
    if (unk_id >= 0 && !(fuse_unk && last_was_unk)) symbols.push_back(unk_id);
    last_was_unk = unk_id >= 0;
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    if (auto id = find(word)) {
      out.push_back(*id);
      return;
    }
  }
  std::vector<int32_t> ids;
  initial_symbols(word, ids);
  const int32_t n = static_cast<int32_t>(ids.size());
  if (n < 2) {
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  // Doubly linked list over the symbols; a merge folds the right symbol into the left one.
  std::vector<int32_t> prev(static_cast<size_t>(n)), next(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    prev[static_cast<size_t>(i)] = i - 1;
    next[static_cast<size_t>(i)] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank, left, left_id, right_id, merged;
    // Lowest rank first; among equal ranks the leftmost, as HF does.
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = next[static_cast<size_t>(left)];
    if (right < 0) return;
    const int32_t left_id = ids[static_cast<size_t>(left)], right_id = ids[static_cast<size_t>(right)];
    auto it = merges_.find(pair_key(left_id, right_id));
    if (it != merges_.end()) queue.push({it->second.rank, left, left_id, right_id, it->second.merged});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  std::vector<bool> alive(static_cast<size_t>(n), true);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    const auto left = static_cast<size_t>(c.left);
    const int32_t right = next[left];
    // Stale entries: a symbol's id only changes by growing, so matching ids mean the pair is still there.
    if (!alive[left] || right < 0 || ids[left] != c.left_id || ids[static_cast<size_t>(right)] != c.right_id) {
      continue;
    }
    ids[left] = c.merged;
    alive[static_cast<size_t>(right)] = false;
    const int32_t after = next[static_cast<size_t>(right)];
    next[left] = after;
    if (after >= 0) prev[static_cast<size_t>(after)] = c.left;
    consider(prev[left]);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0; i = next[static_cast<size_t>(i)]) out.push_back(ids[static_cast<size_t>(i)]);
}

}  // namespace eaglet::tok
