#pragma once
// Hugging Face tokenizer.json tokenizers: byte-level BPE (Llama-3, Qwen2/3) and SentencePiece-style BPE with byte
// fallback (Llama-2, Mistral). Encoding follows the tokenizers pipeline: added tokens are split out first, then
// normalizer, pre-tokenizer, BPE, post-processor. Unsupported components are rejected at load with an Error.
//
// A Tokenizer is immutable after load(): encode/decode are const, keep no caches, and may run concurrently.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace eaglet {

namespace tok {
struct TokenizerData;
class DecodeState;
}  // namespace tok

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and, if present, DIR/tokenizer_config.json (add_bos_token, add_eos_token, bos/eos
  // token strings, clean_up_tokenization_spaces, legacy). Throws eaglet::Error naming the file and field.
  static Tokenizer load(const std::string& model_dir);

  // Encodes text. Added/special token strings in the text map to their ids (HF's default). Invalid UTF-8 in the
  // text is replaced by U+FFFD first. add_bos: add what the post-processor adds around the text, which is HF's
  // add_special_tokens=True: BOS for Llama/Mistral, nothing for Qwen (and an EOS where a tokenizer appends one).
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const;
  // Decodes ids; skip_special drops special added tokens. Ids the tokenizer does not know decode to nothing.
  // clean_up_tokenization_spaces is not applied (lossy; streaming could not reproduce it).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  int32_t bos_id() const;  // the BOS id that encode(.., add_bos=true) prepends; -1 when none (Qwen)
  bool adds_bos() const;   // whether HF's default encode() prepends BOS
  int32_t eos_id() const;  // tokenizer_config.json eos_token; -1 when absent
  std::optional<int32_t> token_id(std::string_view token_content) const;  // exact vocab/added-token lookup
  size_t vocab_size() const;                                              // max id + 1
  bool is_special(int32_t id) const;
  // The bytes `id` adds after other text (no start-of-text space strip), before UTF-8 is checked: an alternative
  // token in logprobs.
  std::string continuation_bytes(int32_t id) const;

 private:
  friend class StreamingDetokenizer;
  explicit Tokenizer(std::shared_ptr<const tok::TokenizerData> data);
  std::shared_ptr<const tok::TokenizerData> data_;
};

// A model whose embedding has `vocab_size` rows must accept every id the tokenizer can produce: an Error naming
// `model_file` otherwise (a tokenizer from another model).
void check_tokenizer_fits(const Tokenizer& tokenizer, int64_t vocab_size, const std::string& model_file);

// Incremental detokenizer: push ids one by one, get the text that is now final. The concatenation of all push()
// results and flush() equals Tokenizer::decode of the same ids. Never emits half a UTF-8 sequence, nor text a later
// token could change (the SentencePiece leading-space strip waits for the first character).
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tok, bool skip_special = false);
  ~StreamingDetokenizer();
  StreamingDetokenizer(StreamingDetokenizer&&) noexcept;
  StreamingDetokenizer& operator=(StreamingDetokenizer&&) noexcept;

  // Decodes `ids` and drops their text, so that what follows is decoded as their continuation (a SentencePiece
  // leading space is kept: the decoder strips it at the start of the whole text only). Call before any push.
  void skip(std::span<const int32_t> ids);
  std::string push(int32_t id);
  // The bytes the last pushed id added to the text, before UTF-8 is checked: a part of a character split across
  // tokens stays that part (OpenAI's logprobs "bytes"). Concatenated, they are the text's bytes wherever it is valid
  // UTF-8 and no leading space was stripped.
  const std::string& last_bytes() const;
  std::string flush();  // whatever remains (invalid trailing bytes become U+FFFD); the stream can then go on

 private:
  std::unique_ptr<tok::DecodeState> state_;
};

}  // namespace eaglet
