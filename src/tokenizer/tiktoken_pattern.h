#pragma once
// The Kimi-K2 pre-tokenizer pattern and its translation from the Rust-regex syntax tiktoken compiles to PCRE2.
#include <string>

namespace eaglet::tok {

// `pat_str` of Moonshot's tokenization_kimi.py, verbatim (Rust regex syntax, with class intersections).
extern const char* const kKimiPattern;

// Rewrites a tiktoken (Rust `regex`/`fancy-regex`) pattern into a PCRE2 pattern that matches exactly the same
// strings with the same leftmost-first choices. Throws std::invalid_argument for a construct it does not translate.
std::string tiktoken_pattern_to_pcre2(const std::string& pattern);

}  // namespace eaglet::tok
