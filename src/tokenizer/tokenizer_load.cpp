// Builds TokenizerData from tokenizer.json and tokenizer_config.json, rejecting what the engine cannot reproduce.
#include <filesystem>
#include <stdexcept>

#include "io/files.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_json.h"
#include "util/error.h"

namespace eaglet::tok {
namespace {

std::shared_ptr<const Regex> compile(const JsonField& field, const std::string& pattern) {
  try {
    return std::make_shared<const Regex>(pattern);
  } catch (const std::invalid_argument& e) {
    field.fail_with("invalid regular expression (" + std::string(e.what()) + ")");
  }
}

std::string escape_regex(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/#").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// A {"String": s} or {"Regex": r} pattern, compiled.
std::shared_ptr<const Regex> parse_pattern(const JsonField& pattern) {
  if (auto regex = pattern.optional("Regex")) return compile(*regex, regex->string());
  if (auto literal = pattern.optional("String")) return compile(*literal, escape_regex(literal->string()));
  pattern.fail_expected("an object with \"Regex\" or \"String\"");
}

[[noreturn]] void unsupported(const JsonField& type, std::string_view what, std::string_view supported) {
  type.fail_with("unsupported " + std::string(what) + " type " + type.json().dump() +
                 " (supported: " + std::string(supported) + ")");
}

// Sequences nest in principle; real files nest one or two deep. A bound keeps a hostile file from exhausting the stack.
constexpr int kMaxSequenceDepth = 8;

void check_depth(const JsonField& type, int depth) {
  if (depth > kMaxSequenceDepth)
    type.fail_with("Sequence nested more than " + std::to_string(kMaxSequenceDepth) + " deep");
}

void parse_normalizer(const JsonField& node, Normalizer& out, int depth = 0) {
  const JsonField type = node["type"];
  const std::string name = type.string();
  check_depth(type, depth);
  if (name == "Sequence") {
    const JsonField list = node["normalizers"];
    for (size_t i = 0; i < list.size(); ++i) parse_normalizer(list.element(i), out, depth + 1);
  } else if (name == "NFC") {
    out.add({NormalizerStep::Kind::NFC, {}, {}, nullptr});
  } else if (name == "Prepend") {
    out.add({NormalizerStep::Kind::Prepend, node["prepend"].string(), {}, nullptr});
  } else if (name == "Replace") {
    const JsonField pattern = node["pattern"];
    const std::string content = node.optional("content") ? node["content"].string() : std::string();
    if (auto literal = pattern.optional("String")) {
      out.add({NormalizerStep::Kind::Replace, literal->string(), content, nullptr});
    } else {
      out.add({NormalizerStep::Kind::Replace, {}, content, parse_pattern(pattern)});
    }
  } else if (name == "Strip") {
    if (node.optional_bool("strip_left", true)) out.add({NormalizerStep::Kind::StripLeft, {}, {}, nullptr});
    if (node.optional_bool("strip_right", true)) out.add({NormalizerStep::Kind::StripRight, {}, {}, nullptr});
  } else {
    unsupported(type, "normalizer", "NFC, Prepend, Replace, Strip, Sequence");
  }
}

PreTokenizerStep::Prepend parse_prepend_scheme(const JsonField& node) {
  if (auto scheme = node.optional("prepend_scheme")) {
    const std::string value = scheme->string();
    if (value == "always") return PreTokenizerStep::Prepend::Always;
    if (value == "first") return PreTokenizerStep::Prepend::First;
    if (value == "never") return PreTokenizerStep::Prepend::Never;
    scheme->fail_expected("\"always\", \"first\" or \"never\"");
  }
  // Files written before prepend_scheme existed say add_prefix_space instead.
  return node.optional_bool("add_prefix_space", true) ? PreTokenizerStep::Prepend::Always
                                                      : PreTokenizerStep::Prepend::Never;
}

void parse_pre_tokenizer(const JsonField& node, PreTokenizer& out, int depth = 0) {
  const JsonField type = node["type"];
  const std::string name = type.string();
  check_depth(type, depth);
  if (name == "Sequence") {
    const JsonField list = node["pretokenizers"];
    for (size_t i = 0; i < list.size(); ++i) parse_pre_tokenizer(list.element(i), out, depth + 1);
  } else if (name == "Split") {
    PreTokenizerStep step{PreTokenizerStep::Kind::Split};
    step.pattern = parse_pattern(node["pattern"]);
    const JsonField behavior = node["behavior"];
    const std::string value = behavior.string();
    if (value == "Isolated")
      step.behavior = SplitBehavior::Isolated;
    else if (value == "Removed")
      step.behavior = SplitBehavior::Removed;
    else if (value == "MergedWithPrevious")
      step.behavior = SplitBehavior::MergedWithPrevious;
    else if (value == "MergedWithNext")
      step.behavior = SplitBehavior::MergedWithNext;
    else
      behavior.fail_expected("\"Isolated\", \"Removed\", \"MergedWithPrevious\" or \"MergedWithNext\"");
    if (auto invert = node.optional("invert"); invert && invert->boolean()) {
      invert->fail_expected("false (inverted Split patterns are not supported)");
    }
    out.add(std::move(step));
  } else if (name == "ByteLevel") {
    PreTokenizerStep step{PreTokenizerStep::Kind::ByteLevel};
    step.add_prefix_space = node.optional_bool("add_prefix_space", false);
    step.use_regex = node.optional_bool("use_regex", true);
    out.add(std::move(step));
  } else if (name == "Metaspace") {
    PreTokenizerStep step{PreTokenizerStep::Kind::Metaspace};
    step.replacement = node.optional("replacement") ? node["replacement"].string() : "\u2581";
    if (step.replacement.empty()) node["replacement"].fail_expected("a non-empty string");
    step.prepend = parse_prepend_scheme(node);
    step.split = node.optional_bool("split", true);
    out.add(std::move(step));
  } else {
    unsupported(type, "pre_tokenizer", "Split, ByteLevel, Metaspace, Sequence");
  }
}

// One decoder of a Sequence, in the order Replace*, ByteFallback, Fuse, Strip that streaming reproduces exactly.
void parse_decoder_step(const JsonField& node, DecoderSpec& out, int& stage) {
  const JsonField type = node["type"];
  const std::string name = type.string();
  auto require_stage = [&](int at_most, int next) {
    if (stage > at_most) {
      type.fail_with("decoder " + name +
                     " in this position is not supported (expected the order Replace, "
                     "ByteFallback, Fuse, Strip)");
    }
    stage = next;
  };
  if (name == "Replace") {
    require_stage(0, 0);
    const JsonField pattern = node["pattern"];
    auto literal = pattern.optional("String");
    if (!literal) pattern.fail_expected("{\"String\": ...} (regex patterns are not supported in decoders)");
    out.replacements.emplace_back(literal->string(), node.optional("content") ? node["content"].string() : "");
  } else if (name == "ByteFallback") {
    require_stage(0, 1);
    out.byte_fallback = true;
  } else if (name == "Fuse") {
    require_stage(1, 2);
  } else if (name == "Strip") {
    if (stage != 2) type.fail_with("decoder Strip is supported only after Fuse");
    stage = 3;
    out.strip_content = node["content"].string();
    const JsonField start = node["start"];
    if (!start.json().is_number_unsigned()) start.fail_expected("a non-negative integer");
    out.strip_start = out.strip_content.empty() ? 0 : start.json().get<size_t>();
    if (auto stop = node.optional("stop"); stop && !(stop->json().is_number_integer() && stop->json() == 0)) {
      stop->fail_expected("0 (stripping the end of the text is not supported)");
    }
  } else {
    unsupported(type, "decoder (inside Sequence)", "Replace, ByteFallback, Fuse, Strip");
  }
}

void parse_decoder(const JsonField& node, DecoderSpec& out) {
  const JsonField type = node["type"];
  const std::string name = type.string();
  out.kind = DecoderSpec::Kind::Pieces;
  if (name == "ByteLevel") {
    out.kind = DecoderSpec::Kind::ByteLevel;
  } else if (name == "Metaspace") {
    const std::string replacement = node.optional("replacement") ? node["replacement"].string() : "\u2581";
    out.replacements.emplace_back(replacement, " ");
    out.strip_first_token_space = parse_prepend_scheme(node) != PreTokenizerStep::Prepend::Never;
  } else if (name == "Sequence") {
    const JsonField list = node["decoders"];
    int stage = 0;
    for (size_t i = 0; i < list.size(); ++i) parse_decoder_step(list.element(i), out, stage);
  } else if (name == "Strip") {
    type.fail_with("a lone Strip decoder is not supported (only Sequence[..., Fuse, Strip])");
  } else if (name == "Replace" || name == "ByteFallback" || name == "Fuse") {
    int stage = 0;
    parse_decoder_step(node, out, stage);
  } else {
    unsupported(type, "decoder", "ByteLevel, Metaspace, Sequence of Replace/ByteFallback/Fuse/Strip");
  }
}

std::optional<int32_t> lookup(const TokenizerData& data, std::string_view content) {
  for (const AddedToken& token : data.added) {
    if (token.content == content) return token.id;
  }
  return data.model.find(content);
}

void parse_template(const JsonField& node, TokenizerData& data) {
  const JsonField single = node["single"];
  const auto special_tokens = node.optional("special_tokens");
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const JsonField item = single.element(i);
    if (item.optional("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const JsonField name = item["SpecialToken"]["id"];
    std::vector<int32_t> ids;
    if (special_tokens && special_tokens->optional(name.string())) {
      const JsonField list = (*special_tokens)[name.string()]["ids"];
      for (size_t k = 0; k < list.size(); ++k) ids.push_back(list.element(k).token_id());
    } else if (auto id = lookup(data, name.string())) {
      ids.push_back(*id);
    } else {
      name.fail_with("special token " + name.json().dump() + " is neither in special_tokens nor in the vocabulary");
    }
    auto& target = seen_sequence ? data.suffix_ids : data.prefix_ids;
    target.insert(target.end(), ids.begin(), ids.end());
  }
}

void parse_post_processor(const JsonField& node, TokenizerData& data, int depth = 0) {
  const JsonField type = node["type"];
  const std::string name = type.string();
  check_depth(type, depth);
  if (name == "ByteLevel") return;  // only adjusts offsets
  if (name == "TemplateProcessing") {
    parse_template(node, data);
  } else if (name == "Sequence") {
    const JsonField list = node["processors"];
    for (size_t i = 0; i < list.size(); ++i) parse_post_processor(list.element(i), data, depth + 1);
  } else {
    unsupported(type, "post_processor", "TemplateProcessing, ByteLevel, Sequence");
  }
}

void parse_bpe(const JsonField& model, BpeModel& bpe) {
  if (auto dropout = model.optional("dropout"); dropout && !(dropout->json().is_number() && dropout->json() == 0)) {
    dropout->fail_expected("null (BPE dropout is for training)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (auto affix = model.optional(key); affix && !affix->string().empty()) {
      affix->fail_expected("null or \"\" (subword prefixes/suffixes are not supported)");
    }
  }
  const JsonField vocab = model["vocab"];
  if (!vocab.json().is_object() || vocab.json().empty())
    vocab.fail_expected("a non-empty object mapping token strings to ids");
  bpe.vocab.reserve(vocab.json().size());
  for (auto it = vocab.json().begin(); it != vocab.json().end(); ++it) {
    const nlohmann::json& value = it.value();
    const bool valid =
        value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() < JsonField::kMaxTokenId;
    // The field path is only built for the error message.
    if (!valid) JsonField(value, vocab.file(), vocab.path() + "[" + json_quoted(it.key()) + "]").token_id();
    const auto id = value.get<int32_t>();
    bpe.vocab.emplace(it.key(), id);
    if (static_cast<size_t>(id) >= bpe.id_to_token.size()) bpe.id_to_token.resize(static_cast<size_t>(id) + 1);
    std::string& token = bpe.id_to_token[static_cast<size_t>(id)];
    if (!token.empty())  // decoding the id would depend on the file's key order
      vocab.fail_with("id " + std::to_string(id) + " is given to two tokens, " + json_quoted(token) + " and " +
                      json_quoted(it.key()));
    token = it.key();
  }
  bpe.byte_fallback = model.optional_bool("byte_fallback", false);
  bpe.fuse_unk = model.optional_bool("fuse_unk", false);
  bpe.ignore_merges = model.optional_bool("ignore_merges", false);
  if (auto unk = model.optional("unk_token")) bpe.unk_id = bpe.find(unk->string()).value_or(-1);
  bpe.index_byte_tokens();

  const JsonField merges = model["merges"];
  const size_t count = merges.size();
  for (size_t rank = 0; rank < count; ++rank) {
    const nlohmann::json& merge = merges.json()[rank];
    auto field = [&] { return merges.element(rank); };  // built only for error messages
    std::string left, right;
    if (merge.is_string()) {
      // "a b": tokens of this older format cannot contain spaces, so the first space separates them.
      const auto& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos) field().fail_expected("\"LEFT RIGHT\" (two tokens separated by a space)");
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      field().fail_expected("\"LEFT RIGHT\" or [\"LEFT\", \"RIGHT\"]");
    }
    const auto left_id = bpe.find(left), right_id = bpe.find(right), merged_id = bpe.find(left + right);
    if (!left_id || !right_id || !merged_id) {
      const std::string missing = !left_id ? left : !right_id ? right : left + right;
      field().fail_with("token " + json_quoted(missing) + " is not in model.vocab");
    }
    bpe.add_merge(*left_id, *right_id, *merged_id, static_cast<int32_t>(rank));
  }
}

void parse_added_tokens(const JsonField& list, TokenizerData& data) {
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonField item = list.element(i);
    AddedToken token;
    token.id = item["id"].token_id();
    token.content = item["content"].string();
    if (token.content.empty()) item["content"].fail_expected("a non-empty string");
    token.special = item.optional_bool("special", false);
    token.lstrip = item.optional_bool("lstrip", false);
    token.rstrip = item.optional_bool("rstrip", false);
    token.single_word = item.optional_bool("single_word", false);
    token.normalized = item.optional_bool("normalized", !token.special);
    data.added.push_back(std::move(token));
  }
}

struct ConfigOptions {
  std::optional<bool> add_bos, add_eos;
  std::optional<std::string> bos_token, eos_token;
  std::vector<std::string> additional_special;
};

ConfigOptions read_config(const std::string& file, TokenizerData& data) {
  ConfigOptions options;
  if (!path_exists(file)) return options;
  const nlohmann::json json = read_json_file(file);
  const JsonField config(json, file, "");
  if (!json.is_object()) config.fail_expected("an object");
  if (auto v = config.optional("add_bos_token")) options.add_bos = v->boolean();
  if (auto v = config.optional("add_eos_token")) options.add_eos = v->boolean();
  options.bos_token = config_token(config, "bos_token");
  options.eos_token = config_token(config, "eos_token");
  data.clean_up_tokenization_spaces = config.optional_bool("clean_up_tokenization_spaces", false);
  // "legacy" only matters when transformers converts a SentencePiece model; tokenizer.json already reflects it.
  config.optional_bool("legacy", true);
  if (auto list = config.optional("additional_special_tokens")) {
    for (size_t i = 0; i < list->size(); ++i) {
      const JsonField item = list->element(i);
      options.additional_special.push_back(item.json().is_object() ? item["content"].string() : item.string());
    }
  }
  return options;
}

// transformers' LlamaTokenizerFast rebuilds the post-processor from add_bos_token/add_eos_token; for files that
// agree with their template (all real ones we know) this changes nothing.
void apply_config(const std::string& file, const ConfigOptions& options, TokenizerData& data) {
  auto resolve = [&](const std::optional<std::string>& token, const char* field) -> int32_t {
    if (!token) return -1;
    if (auto id = lookup(data, *token)) return *id;
    fail(file, ": field \"", field, "\": token ", json_quoted(*token), " is not in the tokenizer's vocabulary");
  };
  const int32_t bos = resolve(options.bos_token, "bos_token");
  data.eos_id = resolve(options.eos_token, "eos_token");
  if (options.add_bos) {
    data.prefix_ids.clear();
    if (*options.add_bos && bos >= 0) data.prefix_ids.push_back(bos);
  }
  if (options.add_eos) {
    data.suffix_ids.clear();
    if (*options.add_eos && data.eos_id >= 0) data.suffix_ids.push_back(data.eos_id);
  }
  for (const std::string& content : options.additional_special) {
    if (auto id = lookup(data, content); id && static_cast<size_t>(*id) < data.special_by_id.size()) {
      data.special_by_id[static_cast<size_t>(*id)] = true;
    }
  }
}

}  // namespace

std::optional<std::string> config_token(const JsonField& config, std::string_view key) {
  auto field = config.optional(key);
  if (!field) return std::nullopt;
  if (field->json().is_object()) return (*field)["content"].string();
  return field->string();
}

void index_added_tokens(TokenizerData& data) {
  size_t size = data.model.id_to_token.size();
  for (const AddedToken& token : data.added) size = std::max(size, static_cast<size_t>(token.id) + 1);
  data.added_index_by_id.assign(size, -1);
  data.special_by_id.assign(size, false);
  for (size_t i = 0; i < data.added.size(); ++i) {
    const AddedToken& token = data.added[i];
    data.added_index_by_id[static_cast<size_t>(token.id)] = static_cast<int32_t>(i);
    data.special_by_id[static_cast<size_t>(token.id)] = token.special;
    // As transformers.js: tokens marked normalized are looked for in the normalized text, in normalized form.
    if (token.normalized && !data.normalizer.empty()) {
      const std::string pattern = data.normalizer.apply(token.content);
      if (!pattern.empty()) data.normalized_matcher.add(pattern, token.id, token.single_word);
    } else {
      data.raw_matcher.add(token.content, token.id, token.single_word);
    }
  }
}

std::shared_ptr<const TokenizerData> load_tokenizer_data(const std::string& model_dir) {
  require_directory(model_dir, "expected a model folder with tokenizer.json");  // a loop, a FIFO: named
  auto data = std::make_shared<TokenizerData>();
  data->file = (std::filesystem::path(model_dir) / "tokenizer.json").string();
  const std::string& file = data->file;
  if (!path_exists(file)) {
    if (has_tiktoken_model(model_dir)) return load_tiktoken_data(model_dir);
    fail(file,
         ": not found (eaglet needs a Hugging Face tokenizer.json, or a tiktoken.model with its "
         "tokenizer_config.json, next to the model)");
  }
  const nlohmann::json json = read_json_file(file);
  const JsonField root(json, file, "");
  if (!json.is_object()) root.fail_expected("an object");

  const JsonField model = root["model"];
  if (auto type = model.optional("type"); !type || type->string() != "BPE") {
    if (type) type->fail_expected("\"BPE\" (the only supported tokenizer model)");
    if (!model.optional("merges")) model["type"];  // no type and not recognisably BPE: report the missing type
  }
  parse_bpe(model, data->model);
  if (auto added = root.optional("added_tokens")) parse_added_tokens(*added, *data);
  if (auto normalizer = root.optional("normalizer")) parse_normalizer(*normalizer, data->normalizer);
  if (auto pre = root.optional("pre_tokenizer")) {
    data->has_pre_tokenizer = true;
    parse_pre_tokenizer(*pre, data->pre_tokenizer);
  }
  if (auto post = root.optional("post_processor")) parse_post_processor(*post, *data);
  if (auto decoder = root.optional("decoder")) parse_decoder(*decoder, data->decoder);
  index_added_tokens(*data);

  const std::string config_file = (std::filesystem::path(model_dir) / "tokenizer_config.json").string();
  apply_config(config_file, read_config(config_file, *data), *data);
  return data;
}

}  // namespace eaglet::tok
