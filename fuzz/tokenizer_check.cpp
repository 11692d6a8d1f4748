#include "tokenizer_check.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace eaglet::fuzz {

namespace {

std::string streamed(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_special) {
  StreamingDetokenizer detok(tokenizer, skip_special);
  std::string text;
  for (int32_t id : ids) text += detok.push(id);
  return text + detok.flush();
}

void check_decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  for (bool skip : {false, true}) {
    const std::string whole = tokenizer.decode(ids, skip), stream = streamed(tokenizer, ids, skip);
    if (whole != stream) {
      std::fprintf(stderr, "fuzz: streamed decoding differs from decode() (skip_special %d)\n", skip);
      __builtin_trap();
    }
  }
}

}  // namespace

void check_tokenizer_on(const Tokenizer& tokenizer, std::string_view text) {
  for (bool add_bos : {false, true}) {
    const std::vector<int32_t> ids = tokenizer.encode(text, add_bos);
    for (int32_t id : ids)
      if (id < 0 || static_cast<size_t>(id) >= tokenizer.vocab_size()) {
        std::fprintf(stderr, "fuzz: encode() gave id %d outside vocab_size %zu\n", id, tokenizer.vocab_size());
        __builtin_trap();
      }
    check_decode(tokenizer, ids);
  }
  std::vector<int32_t> raw(text.size() / sizeof(int32_t));
  if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * sizeof(int32_t));
  std::vector<int32_t> small;
  for (unsigned char c : text) small.push_back(static_cast<int32_t>(c) * 3 - 8);  // near the vocabulary, some < 0
  check_decode(tokenizer, raw);
  check_decode(tokenizer, small);
  tokenizer.token_id(text);
}

}  // namespace eaglet::fuzz
