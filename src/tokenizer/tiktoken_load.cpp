// Builds TokenizerData from a tiktoken tokenizer (Kimi-K2): DIR/tiktoken.model + DIR/tokenizer_config.json, as
// Moonshot's tokenization_kimi.py sets up tiktoken.Encoding.
//
// tiktoken's BPE merges, inside one pre-token, the adjacent pair whose concatenation has the lowest rank (the
// leftmost of equal ones) until no adjacent concatenation is a token, after emitting a pre-token that is itself a
// token whole. That is the tokenizer.json BPE model with ignore_merges and one merge (A, B) -> T of rank rank(T)
// for every way of writing a token T as two tokens A + B: the adjacent symbols are always tokens, so "the pair with
// the lowest-ranked merge" and "the pair whose concatenation has the lowest rank" pick the same pair.
#include <filesystem>
#include <stdexcept>

#include "io/files.h"
#include "tokenizer/tiktoken_pattern.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_json.h"
#include "util/error.h"

namespace eaglet::tok {
namespace {

// Kimi's tokenization_kimi.py: 256 reserved special ids + 2 after the ranks, text cut into windows of 400 000
// characters and runs of at most 25 000 white-space or other characters before tiktoken sees it.
constexpr int32_t kSpecialIds = 256 + 2;
constexpr size_t kWindowChars = 400'000;
constexpr size_t kMaxRunChars = 25'000;

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with padding; nullopt for anything else.
std::optional<std::string> decode_base64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  size_t padding = 0;
  while (padding < 2 && text[text.size() - 1 - padding] == '=') ++padding;
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (size_t i = 0; i < text.size() - padding; ++i) {
    const int value = base64_value(text[i]);
    if (value < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(value);
    if (++count == 4) {
      for (int shift = 16; shift >= 0; shift -= 8) out.push_back(static_cast<char>((bits >> shift) & 0xFF));
      bits = 0;
      count = 0;
    }
  }
  if (count == 2) out.push_back(static_cast<char>((bits >> 4) & 0xFF));
  if (count == 3) {
    out.push_back(static_cast<char>((bits >> 10) & 0xFF));
    out.push_back(static_cast<char>((bits >> 2) & 0xFF));
  }
  return out;
}

std::string hex_bytes(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += "\\x";
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

struct Ranks {
  std::vector<std::string> token_by_rank;
};

struct Entry {
  std::string token;
  size_t rank, line;
};

// tiktoken.model: one "BASE64 RANK" per line (empty lines skipped, as tiktoken's loader does). The ranks must be
// 0..N-1, each once, and the tokens distinct: the special ids follow at N, and a gap or a duplicate would make
// tiktoken give two meanings to one id.
Ranks read_ranks(const std::string& file) {
  const std::string text = read_file(file);
  TokenMap line_by_token;
  std::vector<Entry> entries;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const auto where = [&] { return file + ":" + std::to_string(line_number); };
    const size_t space = line.find_first_of(" \t");
    const size_t rank_begin = line.find_first_not_of(" \t", space);
    if (space == std::string::npos || rank_begin == std::string::npos ||
        line.find_first_of(" \t", rank_begin) != std::string::npos) {
      fail(where(), ": expected \"BASE64_TOKEN RANK\", found ", json_quoted(line), " (is this a tiktoken.model file?)");
    }
    const std::string_view encoded = line.substr(0, space), rank_text = line.substr(rank_begin);
    auto token = decode_base64(encoded);
    if (!token) {
      fail(where(), ": token ", json_quoted(encoded),
           " is not valid base64 (expected A-Z a-z 0-9 + / with = padding "
           "to a multiple of 4 characters); the file is damaged: fetch it again");
    }
    if (rank_text.size() > 8 || rank_text.find_first_not_of("0123456789") != std::string_view::npos ||
        std::stol(std::string(rank_text)) >= JsonField::kMaxTokenId) {
      fail(where(), ": rank ", json_quoted(rank_text), " is not a non-negative integer below ", JsonField::kMaxTokenId,
           "; the file is damaged: fetch it again");
    }
    if (auto [it, added] = line_by_token.emplace(*token, static_cast<int32_t>(line_number)); !added) {
      fail(where(), ": token ", encoded, " (bytes \"", hex_bytes(*token), "\") is already given on line ", it->second,
           "; each token must have one rank: the file is damaged, fetch it again");
    }
    entries.push_back({std::move(*token), static_cast<size_t>(std::stol(std::string(rank_text))), line_number});
  }
  const size_t count = entries.size();
  if (count == 0) fail(file, ": no tokens (expected one \"BASE64_TOKEN RANK\" per line)");
  Ranks ranks;
  ranks.token_by_rank.resize(count);
  std::vector<size_t> line_by_rank(count, 0);
  for (Entry& entry : entries) {
    if (entry.rank >= count) continue;
    if (line_by_rank[entry.rank] != 0) {
      fail(file, ":", entry.line, ": rank ", entry.rank, " is already given on line ", line_by_rank[entry.rank],
           "; each rank must belong to one token: the file is damaged, fetch it again");
    }
    line_by_rank[entry.rank] = entry.line;
    ranks.token_by_rank[entry.rank] = std::move(entry.token);
  }
  for (const Entry& entry : entries) {
    if (entry.rank < count) continue;
    size_t missing = 0;
    while (line_by_rank[missing] != 0) ++missing;
    fail(file, ":", entry.line, ": rank ", entry.rank, " is out of sequence: the ", count,
         " tokens must have the ranks 0..", count - 1, " (special ids follow them), and rank ", missing,
         " is missing; the file is damaged: fetch it again");
  }
  for (int b = 0; b < 256; ++b) {
    if (line_by_token.find(std::string(1, static_cast<char>(b))) == line_by_token.end()) {
      fail(file, ": the single byte ", hex_bytes(std::string(1, static_cast<char>(b))),
           " has no rank (byte-level BPE "
           "needs all 256 single bytes, or text containing it could not be encoded); the file is incomplete");
    }
  }
  return ranks;
}

void build_bpe(const Ranks& ranks, BpeModel& bpe) {
  const auto& tokens = ranks.token_by_rank;
  TokenMap by_bytes;
  by_bytes.reserve(tokens.size());
  bpe.vocab.reserve(tokens.size());
  bpe.id_to_token.resize(tokens.size());
  for (size_t rank = 0; rank < tokens.size(); ++rank) {
    by_bytes.emplace(tokens[rank], static_cast<int32_t>(rank));
    std::string mapped;  // the byte-level alphabet the ByteLevel pre-tokenizer and decoder use
    for (char c : tokens[rank]) mapped += byte_to_unicode()[static_cast<unsigned char>(c)];
    bpe.vocab.emplace(mapped, static_cast<int32_t>(rank));
    bpe.id_to_token[rank] = std::move(mapped);
  }
  for (size_t rank = 0; rank < tokens.size(); ++rank) {
    const std::string_view token = tokens[rank];
    for (size_t split = 1; split < token.size(); ++split) {
      const auto left = by_bytes.find(token.substr(0, split)), right = by_bytes.find(token.substr(split));
      if (left == by_bytes.end() || right == by_bytes.end()) continue;
      bpe.add_merge(left->second, right->second, static_cast<int32_t>(rank), static_cast<int32_t>(rank));
    }
  }
  bpe.ignore_merges = true;
  bpe.index_byte_tokens();
}

// Special ids N..N+257 named from added_tokens_decoder, the others <|reserved_token_ID|> (tokenization_kimi.py).
void add_special_tokens(const JsonField& config, int32_t base, TokenizerData& data) {
  std::vector<AddedToken> specials(kSpecialIds);
  for (int32_t i = 0; i < kSpecialIds; ++i) {
    specials[static_cast<size_t>(i)] = {"<|reserved_token_" + std::to_string(base + i) + "|>", base + i, true};
  }
  const JsonField decoder = config["added_tokens_decoder"];
  if (!decoder.json().is_object()) decoder.fail_expected("an object mapping ids to {\"content\": ...}");
  for (auto it = decoder.json().begin(); it != decoder.json().end(); ++it) {
    const JsonField item(it.value(), config.file(), decoder.path() + "[" + json_quoted(it.key()) + "]");
    const std::string& key = it.key();
    const bool numeric = !key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos;
    const int64_t id = numeric ? std::stoll(key) : -1;
    if (id < base || id >= base + kSpecialIds) {
      item.fail_with("the key is not a special-token id: tiktoken.model has " + std::to_string(base) +
                     " ranks, so special ids are " + std::to_string(base) + ".." +
                     std::to_string(base + kSpecialIds - 1) + " (is the tokenizer_config.json from another model?)");
    }
    AddedToken& token = specials[static_cast<size_t>(id - base)];
    token.content = item["content"].string();
    if (token.content.empty()) item["content"].fail_expected("a non-empty string");
    token.special = item.optional_bool("special", true);
    // lstrip/rstrip/single_word are ignored: the reference encodes with tiktoken, which has no such options.
  }
  for (const AddedToken& token : specials) {
    for (const AddedToken& other : specials) {
      if (other.id < token.id && other.content == token.content) {
        decoder.fail_with("ids " + std::to_string(other.id) + " and " + std::to_string(token.id) +
                          " have the same content " + json_quoted(token.content) +
                          "; each special token needs its "
                          "own text");
      }
    }
  }
  data.added = std::move(specials);
}

int32_t special_id(const TokenizerData& data, const JsonField& config, std::string_view key,
                   const std::string& fallback) {
  const std::string name = config_token(config, key).value_or(fallback);
  for (const AddedToken& token : data.added) {
    if (token.content == name) return token.id;
  }
  fail(config.file(), ": field \"", key, "\": token ", json_quoted(name),
       " is not one of the special tokens "
       "(added_tokens_decoder or <|reserved_token_ID|>); fix the field or added_tokens_decoder");
}

}  // namespace

bool has_tiktoken_model(const std::string& model_dir) {
  return path_exists((std::filesystem::path(model_dir) / "tiktoken.model").string());
}

std::shared_ptr<const TokenizerData> load_tiktoken_data(const std::string& model_dir) {
  auto data = std::make_shared<TokenizerData>();
  data->file = (std::filesystem::path(model_dir) / "tiktoken.model").string();
  const Ranks ranks = read_ranks(data->file);
  build_bpe(ranks, data->model);
  const auto base = static_cast<int32_t>(ranks.token_by_rank.size());

  const std::string config_file = (std::filesystem::path(model_dir) / "tokenizer_config.json").string();
  if (!path_exists(config_file)) {
    fail(config_file,
         ": not found (a tiktoken.model tokenizer names its special tokens in tokenizer_config.json "
         "\"added_tokens_decoder\"; copy it from the model's repository)");
  }
  const nlohmann::json json = read_json_file(config_file);
  const JsonField config(json, config_file, "");
  if (!json.is_object()) config.fail_expected("an object");
  add_special_tokens(config, base, *data);
  index_added_tokens(*data);
  // tokenization_kimi.py's defaults, checked as it does; its encode() adds neither BOS nor EOS.
  special_id(*data, config, "bos_token", "[BOS]");
  data->eos_id = special_id(*data, config, "eos_token", "[EOS]");

  data->has_pre_tokenizer = true;
  PreTokenizerStep split{PreTokenizerStep::Kind::Split};
  try {
    split.pattern = std::make_shared<const Regex>(tiktoken_pattern_to_pcre2(kKimiPattern));
  } catch (const std::invalid_argument& e) {
    fail("internal error: the Kimi pre-tokenizer pattern does not compile (", e.what(), ")");
  }
  split.behavior = SplitBehavior::Isolated;
  data->pre_tokenizer.add(std::move(split));
  PreTokenizerStep byte_level{PreTokenizerStep::Kind::ByteLevel};
  byte_level.use_regex = false;
  data->pre_tokenizer.add(std::move(byte_level));
  data->decoder.kind = DecoderSpec::Kind::ByteLevel;
  data->window_chars = kWindowChars;
  data->max_run_chars = kMaxRunChars;
  return data;
}

}  // namespace eaglet::tok
