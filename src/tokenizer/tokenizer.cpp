#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode_utf8.h"
#include "util/error.h"

namespace eaglet {
namespace tok {
namespace {

bool is_word_char(std::string_view text, size_t pos) {
  size_t p = pos;
  const char32_t cp = unicode::next_code_point(text, p);
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || cp == '_';
  return !unicode::is_white_space(cp);  // approximation: non-ASCII, non-space characters count as word characters
}

size_t previous_char_start(std::string_view text, size_t pos) {
  size_t start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return start;
}

// Number of bytes of white space at the end / start of text (JS trimEnd/trimStart on a section).
size_t trailing_space(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    const size_t start = previous_char_start(text, end);
    size_t pos = start;
    if (!unicode::is_white_space(unicode::next_code_point(text, pos))) break;
    end = start;
  }
  return text.size() - end;
}

// Splits text at added tokens and applies their lstrip/rstrip to the neighbouring text sections.
std::vector<AddedTokenMatcher::Section> split_added(const TokenizerData& data, const AddedTokenMatcher& matcher,
                                                    std::string_view text) {
  if (matcher.empty()) return {{0, text.size(), -1}};
  auto sections = matcher.split(text);
  for (size_t i = 0; i < sections.size(); ++i) {
    const AddedToken* token = data.added_token(sections[i].added_id);
    if (token == nullptr) continue;
    if (token->lstrip && i > 0 && sections[i - 1].added_id < 0) {
      auto& before = sections[i - 1];
      before.end -= trailing_space(text.substr(before.begin, before.end - before.begin));
    }
    if (token->rstrip && i + 1 < sections.size() && sections[i + 1].added_id < 0) {
      auto& after = sections[i + 1];
      after.begin += white_space_prefix(text.substr(after.begin, after.end - after.begin));
    }
  }
  return sections;
}

// "<0xAB>" -> 0xAB, as the ByteFallback decoder reads byte tokens; -1 for any other token.
int byte_token_value(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int high = hex(token[3]), low = hex(token[4]);
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

// A byte-level token back to its bytes; a token outside the byte alphabet is taken as its own UTF-8 (as HF does).
std::string byte_level_bytes(const std::string& token) {
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    const int byte = unicode_to_byte(unicode::next_code_point(token, pos));
    if (byte < 0) return token;
    bytes.push_back(static_cast<char>(byte));
  }
  return bytes;
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
  }
}

}  // namespace

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  for (const auto& [b, index] : nodes_[static_cast<size_t>(node)].children) {
    if (b == byte) return index;
  }
  return -1;
}

void AddedTokenMatcher::add(const std::string& pattern, int32_t id, bool single_word) {
  int32_t node = 0;
  for (char c : pattern) {
    const auto byte = static_cast<unsigned char>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.push_back(Node{});
      nodes_[static_cast<size_t>(node)].children.emplace_back(byte, next);
    }
    node = next;
  }
  nodes_[static_cast<size_t>(node)].token = id;
  nodes_[static_cast<size_t>(node)].single_word = single_word;
}

std::vector<AddedTokenMatcher::Section> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Section> sections;
  size_t start = 0;  // of the pending text section
  size_t pos = 0;
  while (pos < text.size()) {
    int32_t node = 0, token = -1;
    size_t match_end = 0;
    bool single_word = false;
    for (size_t j = pos; j < text.size(); ++j) {
      node = child(node, static_cast<unsigned char>(text[j]));
      if (node < 0) break;
      if (nodes_[static_cast<size_t>(node)].token >= 0) {
        token = nodes_[static_cast<size_t>(node)].token;
        single_word = nodes_[static_cast<size_t>(node)].single_word;
        match_end = j + 1;
      }
    }
    // single_word tokens match only as whole words (HF tokenizers; transformers.js ignores the flag).
    if (token >= 0 && single_word &&
        ((pos > 0 && is_word_char(text, previous_char_start(text, pos))) ||
         (match_end < text.size() && is_word_char(text, match_end)))) {
      token = -1;
    }
    if (token < 0) {
      pos += unicode::utf8_sequence_length(static_cast<unsigned char>(text[pos]));
      continue;
    }
    if (pos > start) sections.push_back({start, pos, -1});
    sections.push_back({pos, match_end, token});
    pos = start = match_end;
  }
  if (start < text.size()) sections.push_back({start, text.size(), -1});
  return sections;
}

const std::string* TokenizerData::token_text(int32_t id) const {
  if (const AddedToken* token = added_token(id)) return &token->content;
  if (id < 0 || static_cast<size_t>(id) >= model.id_to_token.size()) return nullptr;
  const std::string& text = model.id_to_token[static_cast<size_t>(id)];
  return text.empty() ? nullptr : &text;
}

std::optional<TokenBytes> token_bytes(const TokenizerData& data, int32_t id, bool first, bool skip_special) {
  const std::string* token = data.token_text(id);
  if (token == nullptr || (skip_special && data.is_special(id))) return std::nullopt;
  const DecoderSpec& decoder = data.decoder;
  switch (decoder.kind) {
    case DecoderSpec::Kind::ByteLevel:
      // Added tokens are text, not byte-level symbols; they end the pending byte run (as transformers.js).
      if (data.added_token(id) != nullptr) return TokenBytes{*token, true};
      return TokenBytes{byte_level_bytes(*token), false};
    case DecoderSpec::Kind::Pieces: {
      if (const int byte = decoder.byte_fallback ? byte_token_value(*token) : -1; byte >= 0)
        return TokenBytes{std::string(1, static_cast<char>(byte)), false};
      std::string text = *token;
      for (const auto& [from, to] : decoder.replacements) replace_all(text, from, to);
      if (decoder.strip_first_token_space && first && text.starts_with(' ')) text.erase(0, 1);
      return TokenBytes{std::move(text), true};
    }
    case DecoderSpec::Kind::Joined: return TokenBytes{first ? *token : " " + *token, true};
  }
  return std::nullopt;
}

std::string DecodeState::push(int32_t id) {
  std::optional<TokenBytes> t = token_bytes(*data_, id, tokens_seen_ == 0, skip_special_);
  last_bytes_ = t ? t->bytes : std::string();
  if (!t) return {};
  ++tokens_seen_;
  return strip_leading(t->text ? bytes_.finish() + t->bytes : bytes_.push(t->bytes));
}

std::string DecodeState::finish() { return strip_leading(bytes_.finish()); }

// Strip(content, start, 0) after Fuse removes up to `start` leading `content` characters of the whole text; the
// decision is final once a different character has been seen.
std::string DecodeState::strip_leading(std::string text) {
  const DecoderSpec& decoder = data_->decoder;
  if (strip_finished_ || decoder.strip_start == 0) return text;
  const std::string& content = decoder.strip_content;
  size_t pos = 0;
  while (pos < text.size() && !strip_finished_) {
    if (strip_done_ < decoder.strip_start && text.compare(pos, content.size(), content) == 0) {
      pos += content.size();
      ++strip_done_;
    } else {
      strip_finished_ = true;
    }
  }
  if (strip_done_ == decoder.strip_start) strip_finished_ = true;
  text.erase(0, pos);
  return text;
}

}  // namespace tok

Tokenizer::Tokenizer(std::shared_ptr<const tok::TokenizerData> data) : data_(std::move(data)) {}

Tokenizer Tokenizer::load(const std::string& model_dir) { return Tokenizer(tok::load_tokenizer_data(model_dir)); }

namespace tok {
namespace {

// Encodes one text: added tokens split out, then normalizer, pre-tokenizer and model on the text between them.
void encode_text(const TokenizerData& data, std::string_view text, std::vector<int32_t>& ids) {
  const auto sections = split_added(data, data.raw_matcher, text);
  for (size_t index = 0; index < sections.size(); ++index) {
    const auto& section = sections[index];
    if (section.added_id >= 0) {
      ids.push_back(section.added_id);
      continue;
    }
    if (section.end <= section.begin) continue;
    const std::string normalized = data.normalizer.apply(text.substr(section.begin, section.end - section.begin));
    if (normalized.empty()) continue;
    for (const auto& part : split_added(data, data.normalized_matcher, normalized)) {
      if (part.added_id >= 0) {
        ids.push_back(part.added_id);
        continue;
      }
      if (part.end <= part.begin) continue;
      const std::string_view piece = std::string_view(normalized).substr(part.begin, part.end - part.begin);
      if (!data.has_pre_tokenizer) {
        data.model.encode_word(piece, ids);
        continue;
      }
      for (const std::string& word : data.pre_tokenizer.apply(piece, /*first_section=*/index == 0)) {
        data.model.encode_word(word, ids);
      }
    }
  }
}

}  // namespace

std::vector<std::string_view> tiktoken_chunks(std::string_view text, size_t window_chars, size_t max_run_chars) {
  std::vector<std::string_view> chunks;
  size_t window_begin = 0;
  while (window_begin < text.size()) {
    size_t window_end = window_begin;
    for (size_t n = 0; n < window_chars && window_end < text.size(); ++n) unicode::next_code_point(text, window_end);
    size_t slice_begin = window_begin, run = 0;
    bool run_is_space = false;
    for (size_t pos = window_begin; pos < window_end;) {
      const size_t start = pos;
      const bool space = unicode::is_python_space(unicode::next_code_point(text, pos));
      if (start == window_begin || space != run_is_space) {
        run = 1;
        run_is_space = space;
      } else if (++run > max_run_chars) {
        chunks.push_back(text.substr(slice_begin, start - slice_begin));
        slice_begin = start;
        run = 1;
      }
    }
    chunks.push_back(text.substr(slice_begin, window_end - slice_begin));
    window_begin = window_end;
  }
  return chunks;
}

}  // namespace tok

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool add_bos) const {
  const tok::TokenizerData& data = *data_;
  std::string sanitized;
  std::string_view text = input;
  if (!unicode::is_valid_utf8(text)) {
    sanitized = unicode::to_valid_utf8(text);
    text = sanitized;
  }
  std::vector<int32_t> ids;
  if (add_bos) ids = data.prefix_ids;
  if (data.window_chars == 0) {
    tok::encode_text(data, text, ids);
  } else {
    for (std::string_view chunk : tok::tiktoken_chunks(text, data.window_chars, data.max_run_chars)) {
      tok::encode_text(data, chunk, ids);
    }
  }
  if (add_bos) ids.insert(ids.end(), data.suffix_ids.begin(), data.suffix_ids.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  tok::DecodeState state(data_, skip_special);
  std::string text;
  for (int32_t id : ids) text += state.push(id);
  return text + state.finish();
}

int32_t Tokenizer::bos_id() const { return data_->prefix_ids.empty() ? -1 : data_->prefix_ids.front(); }
bool Tokenizer::adds_bos() const { return !data_->prefix_ids.empty(); }
int32_t Tokenizer::eos_id() const { return data_->eos_id; }

std::optional<int32_t> Tokenizer::token_id(std::string_view content) const {
  for (const tok::AddedToken& token : data_->added) {
    if (token.content == content) return token.id;
  }
  return data_->model.find(content);
}

size_t Tokenizer::vocab_size() const { return data_->added_index_by_id.size(); }
bool Tokenizer::is_special(int32_t id) const { return data_->is_special(id); }

std::string Tokenizer::continuation_bytes(int32_t id) const {
  const std::optional<tok::TokenBytes> t = tok::token_bytes(*data_, id, /*first=*/false, /*skip_special=*/false);
  return t ? t->bytes : std::string();
}

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tok, bool skip_special)
    : state_(std::make_unique<tok::DecodeState>(tok.data_, skip_special)) {}
StreamingDetokenizer::~StreamingDetokenizer() = default;
StreamingDetokenizer::StreamingDetokenizer(StreamingDetokenizer&&) noexcept = default;
StreamingDetokenizer& StreamingDetokenizer::operator=(StreamingDetokenizer&&) noexcept = default;

void StreamingDetokenizer::skip(std::span<const int32_t> ids) {
  for (int32_t id : ids) state_->push(id);
}
std::string StreamingDetokenizer::push(int32_t id) { return state_->push(id); }
const std::string& StreamingDetokenizer::last_bytes() const { return state_->last_bytes(); }
std::string StreamingDetokenizer::flush() { return state_->finish(); }

void check_tokenizer_fits(const Tokenizer& tokenizer, int64_t vocab_size, const std::string& model_file) {
  if (static_cast<int64_t>(tokenizer.vocab_size()) > vocab_size)
    fail(model_file, ": vocab_size ", vocab_size, " is smaller than the tokenizer's ", tokenizer.vocab_size(),
         " ids (tokenizer.json of another model?)");
}

}  // namespace eaglet
