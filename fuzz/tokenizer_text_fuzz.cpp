// Arbitrary bytes through two fixed, valid tokenizers (fuzz/data: the tiny byte-level BPE of the test fixtures with
// ChatML tokens, and a cut-down SentencePiece-style BPE with byte fallback). Byte-level BPE without a normalizer is
// lossless: decoding the encoding gives back the text (invalid UTF-8 replaced by U+FFFD).
#include <cstdio>

#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_utf8.h"
#include "tokenizer_check.h"

using namespace eaglet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizer byte_level = Tokenizer::load(fuzz::data_path("tokenizer_bytelevel"));
  static const Tokenizer sentencepiece = Tokenizer::load(fuzz::data_path("tokenizer_sentencepiece"));
  const std::string_view text = fuzz::as_text(data, size);
  fuzz::expect_clean([&] {
    fuzz::check_tokenizer_on(byte_level, text);
    fuzz::check_tokenizer_on(sentencepiece, text);
    if (byte_level.decode(byte_level.encode(text, false)) != unicode::to_valid_utf8(text)) {
      std::fprintf(stderr, "fuzz: byte-level BPE does not give the text back\n");
      __builtin_trap();
    }
  });
  return 0;
}
