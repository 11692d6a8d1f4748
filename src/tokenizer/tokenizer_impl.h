#pragma once
// Internal state of a loaded Tokenizer (shared, immutable after load) and the incremental decoder that both
// Tokenizer::decode and StreamingDetokenizer run.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer_bpe.h"
#include "tokenizer/tokenizer_text.h"
#include "tokenizer/unicode_utf8.h"

namespace eaglet::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// Finds added tokens in text: at the leftmost position where any token starts, the longest one (as the HF
// tokenizers' leftmost-longest Aho-Corasick and transformers.js's trie splitter both do).
class AddedTokenMatcher {
 public:
  void add(const std::string& pattern, int32_t id, bool single_word);
  bool empty() const { return nodes_.size() <= 1; }
  struct Section {
    size_t begin, end;
    int32_t added_id;  // -1 for plain text
  };
  std::vector<Section> split(std::string_view text) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // byte -> node index
    int32_t token = -1;
    bool single_word = false;
  };
  std::vector<Node> nodes_{Node{}};
  int32_t child(int32_t node, unsigned char byte) const;
};

// The decoder pipeline, reduced to what streaming needs. Supported tokenizer.json decoders map onto it:
//   ByteLevel                                  -> kind ByteLevel
//   Sequence[Replace*, ByteFallback?, Fuse?, Strip(c, n, 0)?] -> kind Pieces
//   Metaspace                                  -> kind Pieces, replacement, strip_first_token_space
//   null                                       -> kind Joined (tokens joined with spaces, as HF does)
struct DecoderSpec {
  enum class Kind { ByteLevel, Pieces, Joined };
  Kind kind = Kind::Joined;
  bool byte_fallback = false;                                     // <0xXX> tokens are raw bytes
  std::vector<std::pair<std::string, std::string>> replacements;  // applied in order to each non-byte token
  std::string strip_content;                                      // Strip: the character removed from the start
  size_t strip_start = 0;                                         // Strip: at most this many of them
  bool strip_first_token_space = false;                           // Metaspace: the first token loses one leading space
};

struct TokenizerData {
  std::string file;  // DIR/tokenizer.json, for messages
  BpeModel model;
  std::vector<AddedToken> added;           // in tokenizer.json order
  std::vector<int32_t> added_index_by_id;  // id -> index in `added`, or -1
  AddedTokenMatcher raw_matcher;           // added tokens with normalized: false, matched on the input
  AddedTokenMatcher normalized_matcher;    // added tokens with normalized: true, matched after normalizing
  Normalizer normalizer;
  bool has_pre_tokenizer = false;
  PreTokenizer pre_tokenizer;
  DecoderSpec decoder;
  std::vector<int32_t> prefix_ids;  // post-processor tokens before the text (BOS)
  std::vector<int32_t> suffix_ids;  // and after it (EOS, rarely)
  std::vector<bool> special_by_id;  // skip_special drops these
  int32_t eos_id = -1;
  bool clean_up_tokenization_spaces = false;  // read but not applied (see Tokenizer::decode)
  // tiktoken tokenizers (Kimi): encode() first cuts the text as tokenization_kimi.py does, into windows of
  // window_chars code points and then runs of at most max_run_chars white-space / other code points (0: no cuts).
  size_t window_chars = 0;
  size_t max_run_chars = 0;

  const AddedToken* added_token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= added_index_by_id.size() || added_index_by_id[id] < 0) return nullptr;
    return &added[static_cast<size_t>(added_index_by_id[id])];
  }
  // The token string of an id (added token content first), or nullptr for an id the tokenizer does not know.
  const std::string* token_text(int32_t id) const;
  bool is_special(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < special_by_id.size() && special_by_id[static_cast<size_t>(id)];
  }
};

// DIR/tokenizer.json when present, else DIR/tiktoken.model (load_tiktoken_data).
std::shared_ptr<const TokenizerData> load_tokenizer_data(const std::string& model_dir);
bool has_tiktoken_model(const std::string& model_dir);
std::shared_ptr<const TokenizerData> load_tiktoken_data(const std::string& model_dir);  // tiktoken_load.cpp

// Indexes data.added (ids, special flags, the matchers that find added tokens in text).
void index_added_tokens(TokenizerData& data);
class JsonField;
// A token named in tokenizer_config.json: a string or an AddedToken object {"content": ...}.
std::optional<std::string> config_token(const JsonField& config, std::string_view key);

// The pieces tokenization_kimi.py hands to tiktoken one by one: windows of `window_chars` code points, each cut
// where a run of Python-str.isspace() or other code points would exceed `max_run_chars`.
std::vector<std::string_view> tiktoken_chunks(std::string_view text, size_t window_chars, size_t max_run_chars);

// The bytes token `id` adds to the decoded text (`first`: it begins the text), before UTF-8 is checked; `text`: they
// are text, which ends a pending run of byte tokens (else raw bytes joined with their neighbours). nullopt: the id
// decodes to nothing (unknown, or special and skipped).
struct TokenBytes {
  std::string bytes;
  bool text = false;
};
std::optional<TokenBytes> token_bytes(const TokenizerData& data, int32_t id, bool first, bool skip_special);

// Turns ids into text one at a time; the output so far is always a prefix of the full decode.
class DecodeState {
 public:
  DecodeState(std::shared_ptr<const TokenizerData> data, bool skip_special)
      : data_(std::move(data)), skip_special_(skip_special) {}
  std::string push(int32_t id);
  std::string finish();
  const std::string& last_bytes() const { return last_bytes_; }  // of the last id pushed (token_bytes)

 private:
  std::shared_ptr<const TokenizerData> data_;
  bool skip_special_;
  unicode::Utf8Accumulator bytes_;
  size_t tokens_seen_ = 0;
  size_t strip_done_ = 0;
  bool strip_finished_ = false;
  std::string last_bytes_;

  std::string strip_leading(std::string text);
};

}  // namespace eaglet::tok
