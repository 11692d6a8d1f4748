// tokenizer.json loading, then the loaded tokenizer on arbitrary text. Input: tokenizer.json NUL text
// [NUL tokenizer_config.json]; without a NUL the whole input is tokenizer.json and the text is empty.
#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_check.h"

using namespace eaglet;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = fuzz::scratch_subdir("tokenizer");
  const auto [json, rest] = fuzz::split_at_nul(fuzz::as_text(data, size));
  const auto [text_part, config] = fuzz::split_at_nul(rest);
  const std::string_view text = text_part;  // a lambda cannot capture a structured binding before C++20 in clang 14
  fuzz::write_file(dir + "/tokenizer.json", json);
  fuzz::write_or_remove(dir + "/tokenizer_config.json", config);
  fuzz::expect_clean([&] {
    const Tokenizer tokenizer = Tokenizer::load(dir);
    fuzz::check_tokenizer_on(tokenizer, text);
  });
  return 0;
}
