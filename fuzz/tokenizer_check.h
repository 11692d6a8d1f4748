#pragma once
// The invariants every loaded tokenizer keeps on any text, shared by the tokenizer targets.
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace eaglet::fuzz {

// Encodes `text` (with and without BOS) and decodes the ids, also streamed, and decodes ids made from the text's
// bytes (unknown and negative ones included). Traps when an id falls outside vocab_size() or when the streamed text
// differs from decode().
void check_tokenizer_on(const Tokenizer& tokenizer, std::string_view text);

}  // namespace eaglet::fuzz
