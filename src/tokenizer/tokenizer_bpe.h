#pragma once
// The BPE model of a tokenizer.json: vocabulary, ranked merges, and the encoding of one pre-tokenized word.
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace eaglet::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  TokenMap vocab;
  std::vector<std::string> id_to_token;  // indexed by id; empty where the vocabulary has a gap
  int32_t unk_id = -1;
  bool byte_fallback = false;  // characters missing from the vocabulary become <0xXX> byte tokens
  bool fuse_unk = false;       // consecutive unknown characters become one unk token
  bool ignore_merges = false;  // a word that is itself in the vocabulary is emitted whole

  // Registers merge `rank` (left + right -> merged). A later merge of the same pair replaces an earlier one, as in
  // HF tokenizers.
  void add_merge(int32_t left, int32_t right, int32_t merged, int32_t rank);
  // Looks up <0x00>..<0xFF> after the vocabulary is complete.
  void index_byte_tokens();

  // Appends the ids of one word. Linear in the word length times log(word length).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> find(std::string_view token) const {
    auto it = vocab.find(token);
    return it == vocab.end() ? std::nullopt : std::optional<int32_t>(it->second);
  }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};  // id of <0xXX>, or -1
  bool all_bytes_present_ = false;

  void initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const;
};

}  // namespace eaglet::tok
