#include "train/extract.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "generate/generation.h"
#include "io/files.h"
#include "io/fingerprint.h"
#include "io/json_util.h"
#include "io/safetensors.h"
#include "kernels/dtype.h"
#include "model/transformer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "train/dataset.h"
#include "train/draft_vocab.h"
#include "train/shards.h"
#include "util/error.h"
#include "util/int_list.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/timer.h"

namespace eaglet {

namespace {

namespace fs = std::filesystem;

uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Why a shard found in the folder cannot be reused ("" when it can). A folder in its place is refused: it is the
// user's, not ours to remove.
std::string shard_damage(const std::string& path, const nlohmann::json& recorded) {
  if (!fs::is_regular_file(path))
    fail(path, ": is not a file (a folder or a link to one?): move it away and rerun; the shard is extracted again");
  return shard_file_damage(path, recorded);
}

std::string shard_name(int64_t k) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "shard-%05lld.safetensors", static_cast<long long>(k));
  return buf;
}

// Rows in order until the token budget is spent; the last one cut to fit (if 2 or more tokens remain).
void apply_budget(std::vector<TrainingRow>& rows, int64_t max_tokens) {
  if (max_tokens <= 0) return;
  int64_t left = max_tokens;
  size_t kept = 0;
  for (; kept < rows.size() && left >= 2; ++kept) {
    TrainingRow& r = rows[kept];
    if (static_cast<int64_t>(r.ids.size()) > left) {
      r.ids.resize(static_cast<size_t>(left));
      r.loss_mask.resize(static_cast<size_t>(left));
    }
    left -= static_cast<int64_t>(r.ids.size());
  }
  rows.resize(kept);
}

class Progress {
 public:
  Progress(bool on, int64_t total) : on_(on), total_(total) {}
  void update(int64_t done, int64_t computed, int64_t shard, int64_t shards) {
    if (!on_) return;
    const double s = timer_.seconds(), rate = s > 0 ? static_cast<double>(computed) / s : 0.0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
    log_progress(strprintf("extract: %lld / %lld tokens (%.1f%%), %.0f tok/s, ETA %d:%02d, shard %lld / %lld   ",
                           static_cast<long long>(done), static_cast<long long>(total_),
                           total_ > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0, rate,
                           static_cast<int>(eta) / 60, static_cast<int>(eta) % 60, static_cast<long long>(shard),
                           static_cast<long long>(shards)));
  }
  void finish() {
    if (on_) log_progress_done();
  }

 private:
  bool on_;
  int64_t total_;
  Timer timer_;
};

}  // namespace

DraftVocab draft_vocab_of_rows(const std::vector<TrainingRow>& rows, int64_t vocab_size, int64_t n) {
  std::vector<int64_t> counts(static_cast<size_t>(vocab_size), 0);
  for (const TrainingRow& r : rows)
    for (size_t t = 0; t < r.ids.size(); ++t)
      if (r.loss_mask[t] != 0) ++counts[static_cast<size_t>(r.ids[t])];
  return build_draft_vocab(counts, n);
}

void capture_row(Transformer& target, const std::vector<int32_t>& ids, int64_t n_aux, int prefill_batch,
                 std::vector<uint16_t>& aux, std::vector<uint16_t>& final_hidden) {
  const int64_t H = target.config().hidden_size, W = target.aux_width(), n = static_cast<int64_t>(ids.size());
  if (W != (n_aux + 1) * H) fail("capture_row: the target captures ", W / H, " states, expected ", n_aux + 1);
  KVCache cache = target.make_cache(n);
  for (int64_t start = 0; start < n; start += prefill_batch) {
    const int64_t m = std::min<int64_t>(prefill_batch, n - start);
    target.forward(cache, {.tokens = {ids.data() + start, static_cast<size_t>(m)}});
    cache.commit_all();
    const float* states = target.aux_hidden().data();
    for (int64_t t = 0; t < m; ++t) {
      for (int64_t i = 0; i < n_aux * H; ++i) aux.push_back(f32_to_bf16(states[t * W + i]));
      for (int64_t i = 0; i < H; ++i) final_hidden.push_back(f32_to_bf16(states[t * W + n_aux * H + i]));
    }
  }
}

namespace {

// One shard: every row through the target, its aux and final states kept in bf16.
void write_shard(Transformer& target, const std::vector<TrainingRow>& rows, size_t begin, size_t end, int64_t n_aux,
                 int prefill_batch, const std::string& path, const nlohmann::json& settings) {
  const int64_t H = target.config().hidden_size;
  std::vector<int64_t> ids, mask, offsets = {0};
  std::vector<uint16_t> aux, final_hidden;
  size_t tokens = 0;
  for (size_t r = begin; r < end; ++r) tokens += rows[r].ids.size();
  aux.reserve(tokens * static_cast<size_t>(n_aux * H));
  final_hidden.reserve(tokens * static_cast<size_t>(H));
  for (size_t r = begin; r < end; ++r) {
    const TrainingRow& row = rows[r];
    const int64_t n = static_cast<int64_t>(row.ids.size());
    capture_row(target, row.ids, n_aux, prefill_batch, aux, final_hidden);
    for (int64_t t = 0; t < n; ++t) {
      ids.push_back(row.ids[static_cast<size_t>(t)]);
      mask.push_back(row.loss_mask[static_cast<size_t>(t)]);
    }
    offsets.push_back(static_cast<int64_t>(ids.size()));
  }
  const int64_t T = static_cast<int64_t>(ids.size());
  // write_safetensors writes under a temporary name and renames when whole: a killed run or a full disk never
  // leaves a torn shard under `path` (a resumed extraction skips the shards present).
  write_safetensors(path,
                    {{"input_ids", DType::I64, {T}, ids.data()},
                     {"loss_mask", DType::I64, {T}, mask.data()},
                     {"row_offsets", DType::I64, {static_cast<int64_t>(offsets.size())}, offsets.data()},
                     {"aux_hidden_states", DType::BF16, {T, n_aux * H}, aux.data()},
                     {"final_hidden_states", DType::BF16, {T, H}, final_hidden.data()}},
                    {{"format", "eaglet-extract/1"}, {"settings", settings.dump()}});
}

GenerationLimits regenerate_limits(const Transformer& target, const ExtractOptions& o) {
  return {o.regenerate_max_tokens, 0, target.config().eos_token_ids, o.prefill_batch};
}

// The replies so far, with a progress line (regeneration runs before the first shard, and is the long part). Each
// reply's tokens are appended to replies.jsonl in the output folder as soon as it is made, so that a resumed
// extraction reads the replies of the killed run instead of decoding them again (a torn last line is dropped).
class Replies {
 public:
  Replies(const fs::path& path, int64_t vocab_size, bool show) : path_(path), show_(show) {
    std::istringstream in(path_exists(path.string()) ? read_file(path.string()) : std::string());
    std::string line, valid;
    for (int64_t line_no = 1; std::getline(in, line) && !in.eof(); ++line_no) {  // a last line without its newline
      const std::string where = path.string() + ":" + std::to_string(line_no);   // was torn by the kill: made again
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!j.is_array())
        fail(where, ": expected a reply's token ids as a JSON array, found ", line.substr(0, 40),
             "; remove the file to regenerate every reply");
      std::vector<int32_t> reply;
      for (const nlohmann::json& t : j) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab_size)
          fail(where, ": token id ", t.dump(), " is not in the target's vocabulary [0, ", vocab_size,
               "); remove the file to regenerate every reply");
        reply.push_back(static_cast<int32_t>(t.get<int64_t>()));
      }
      cached_.push_back(std::move(reply));
      valid += line + "\n";
    }
    write_file_atomic(path.string(), valid);
    out_.open(path, std::ios::binary | std::ios::app);
    if (!out_) fail(path.string(), ": cannot write the regenerated replies here");
  }
  uint64_t count() const { return count_; }
  int64_t reused() const { return reused_; }
  // The reply of this order: the cached one, or make() appended to the cache.
  std::vector<int32_t> next(const std::function<std::vector<int32_t>()>& make) {
    std::vector<int32_t> reply;
    if (count_ < cached_.size()) {
      reply = cached_[count_];
      ++reused_;
    } else {
      reply = make();
      out_ << nlohmann::json(reply).dump() << "\n" << std::flush;
      if (!out_) fail(path_.string(), ": write failed: ", describe_errno(errno));  // a full disk, say
    }
    ++count_;
    tokens_ += static_cast<int64_t>(reply.size());
    if (show_)
      log_progress(strprintf("regenerate: %llu replies (%lld from %s), %lld tokens, %.0f tok/s   ",
                             static_cast<unsigned long long>(count_), static_cast<long long>(reused_),
                             path_.filename().string().c_str(), static_cast<long long>(tokens_),
                             static_cast<double>(tokens_) / std::max(1e-9, timer_.seconds())));
    return reply;
  }

 private:
  fs::path path_;
  bool show_;
  std::vector<std::vector<int32_t>> cached_;
  std::ofstream out_;
  uint64_t count_ = 0;
  int64_t reused_ = 0, tokens_ = 0;
  Timer timer_;
};

// Each regenerated reply's seed follows from --seed and the reply's order, so a rerun writes the same data.
SamplingParams reply_sampling(const ExtractOptions& o, uint64_t order) {
  SamplingParams sampling = o.sampling;
  sampling.seed = o.sampling.seed * 1000003ull + order;
  return sampling;
}

// The target's reply to a conversation, in its chat format, until its end-of-turn or EOS token.
ReplyWriter reply_writer(Transformer& target, const Tokenizer& tokenizer, const ExtractOptions& o,
                         std::shared_ptr<Replies> replies) {
  auto chat = std::make_shared<std::optional<ChatTemplate>>();  // read at the first chat row
  return [&target, &tokenizer, o, replies, chat](const ChatJson& context) {
    if (!chat->has_value()) *chat = ChatTemplate::load(o.model_dir, o.chat_template_file);
    const std::vector<int32_t> reply = replies->next([&] {
      GenerationLimits limits = regenerate_limits(target, o);
      const std::vector<int32_t> eot = tokenizer.encode((*chat)->end_of_turn(), false);
      if (eot.size() == 1) limits.stop_ids.push_back(eot[0]);
      const std::vector<int32_t> prompt = tokenizer.encode((*chat)->render(context, true), false);
      return generate_plain(target, prompt, reply_sampling(o, replies->count()), limits).tokens;
    });
    return tokenizer.decode(reply, /*skip_special=*/true);
  };
}

// The target's continuation of a plain prompt, as tokens, until EOS.
PromptContinuer prompt_continuer(Transformer& target, const ExtractOptions& o, std::shared_ptr<Replies> replies) {
  return [&target, o, replies](const std::vector<int32_t>& prompt) {
    return replies->next([&] {
      return generate_plain(target, prompt, reply_sampling(o, replies->count()), regenerate_limits(target, o)).tokens;
    });
  };
}

}  // namespace

ExtractSummary run_extract(const ExtractOptions& o) {
  Timer timer;
  ExtractSummary sum;
  if (o.rows_per_shard < 1 || o.rows_per_shard > (1 << 20))
    fail("extract: --rows-per-shard must be in [1, 1048576], found ", o.rows_per_shard);
  if (path_exists(o.out_dir) && !is_directory_path(o.out_dir))
    fail(o.out_dir, ": exists and is not a folder (--out names the folder the shards go to)");
  const Tokenizer tokenizer = Tokenizer::load(o.model_dir);
  auto target = Transformer::load(o.model_dir, o.load);
  check_tokenizer_fits(tokenizer, target->config().vocab_size, target->config().file);
  const ModelConfig& c = target->config();
  const std::vector<int> aux =
      o.aux_layers.empty()
          ? usable_default_aux_layers(
                c.num_layers, [](const std::vector<int>& ids) { return "pass --layers " + format_int_list(ids); })
          : o.aux_layers;
  std::vector<int> capture = aux;
  capture.push_back(static_cast<int>(c.num_layers));
  if (std::find(aux.begin(), aux.end(), static_cast<int>(c.num_layers)) != aux.end())
    fail("extract: --layers must not include ", c.num_layers, " (the final state is always written separately)");
  target->set_aux_layers(capture);  // validates the ids before any work

  const std::string data = read_file(o.data_file);  // read once: parsed here, hashed for the manifest
  std::vector<int> sorted_aux = aux;
  std::sort(sorted_aux.begin(), sorted_aux.end());
  nlohmann::json chat_template;  // what renders messages rows: a template changed since is other data
  try {
    const ChatTemplate t = ChatTemplate::load(o.model_dir, o.chat_template_file);
    chat_template = {{"source", fs::absolute(t.source()).lexically_normal().string()},
                     {"fnv1a64", std::to_string(fnv1a(t.text()))}};
  } catch (const Error&) {
    if (!o.chat_template_file.empty()) throw;  // named by the user: it must load
  }
  const nlohmann::json settings = {
      {"chat_template", chat_template},
      {"target", fs::absolute(o.model_dir).lexically_normal().string()},
      {"target_model_type", c.model_type},
      {"target_hidden_size", c.hidden_size},
      {"target_vocab_size", c.vocab_size},
      {"target_num_layers", c.num_layers},
      {"target_fingerprint", model_fingerprint(o.model_dir)},  // io/fingerprint.h: training checks it
      {"data", fs::absolute(o.data_file).lexically_normal().string()},
      {"data_fnv1a64", std::to_string(fnv1a(data))},
      {"aux_layers", sorted_aux},
      {"aux_layer_convention", "input (HF hidden_states[i], the residual stream entering layer i)"},
      {"final_hidden", "pre-norm (hidden_states[num_layers])"},
      {"max_tokens", o.max_tokens},
      {"max_length", o.max_length},
      {"rows_per_shard", o.rows_per_shard},
      {"regenerate", o.regenerate ? nlohmann::json{{"temperature", o.sampling.temperature},
                                                   {"top_p", o.sampling.top_p},
                                                   {"top_k", o.sampling.top_k},
                                                   {"seed", o.sampling.seed},
                                                   {"max_tokens", o.regenerate_max_tokens}}
                                  : nlohmann::json(false)}};
  if (o.parts < 1 || o.part < 0 || o.part >= o.parts)
    fail("extract: --shard ", o.part, "/", o.parts, ": expected I/N with 0 <= I < N");
  if (o.parts > 1 && o.max_tokens > 0)
    fail(
        "extract: --shard and --max-tokens: the budget is spent in file order, which one part cannot see; cut the "
        "data file instead");
  const nlohmann::json part = {{"index", o.part}, {"count", o.parts}};
  create_output_dir(o.out_dir);  // a loop, a parent that is a file, a read-only place: an Error naming it
  const fs::path manifest_path = fs::path(o.out_dir) / "manifest.json";
  nlohmann::json shard_files = nlohmann::json::object();  // name -> {bytes, sha256} of each shard written
  if (path_exists(manifest_path.string())) {
    const nlohmann::json old = read_json_file(manifest_path.string());
    if (old.contains("shard_files") && old["shard_files"].is_object()) shard_files = old["shard_files"];
    if (old.value("part", nlohmann::json()) != (o.parts > 1 ? part : nlohmann::json()))
      fail(manifest_path.string(), ": this folder holds ",
           old.contains("part") ? "part " + old["part"].dump() : std::string("a whole extraction"), ", not ",
           o.parts > 1 ? "part " + part.dump() : std::string("a whole one"), "; use another --out");
    for (const auto& [key, value] : settings.items())
      if (!old.contains("settings") || old["settings"].value(key, nlohmann::json()) != value)
        fail(manifest_path.string(), ": this folder holds an extraction with other settings (", key, ": ",
             old.contains("settings") ? old["settings"].value(key, nlohmann::json()).dump() : "none", " here, ",
             value.dump(), " now); use another --out or remove it");
  } else {  // the settings first: the replies regenerated into this folder belong to them
    // Shards or replies without the manifest that names their settings would be taken over as this run's.
    for (const auto& entry : fs::directory_iterator(o.out_dir)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("shard-", 0) == 0 || name == "replies.jsonl")
        fail(entry.path().string(), ": this folder holds extraction output but no manifest.json naming its settings; ",
             "it cannot be resumed or told apart from this run's: use another --out or remove the folder");
    }
    nlohmann::json first = {{"format", "eaglet-extract/1"}, {"settings", settings}};
    if (o.parts > 1) first["part"] = part;
    write_file_atomic(manifest_path.string(), first.dump(2) + "\n");
  }

  DatasetOptions dataset{o.max_length, {}, {}, o.max_tokens, o.chat_template_file, {}};
  const auto in_part = [&o](int64_t shard) { return shard % o.parts == o.part; };
  if (o.parts > 1)
    dataset.take_row = [&o, in_part](size_t row) { return in_part(static_cast<int64_t>(row) / o.rows_per_shard); };
  std::shared_ptr<Replies> replies;
  if (o.regenerate) {
    replies = std::make_shared<Replies>(fs::path(o.out_dir) / "replies.jsonl", c.vocab_size, o.progress);
    dataset.regenerate = reply_writer(*target, tokenizer, o, replies);
    dataset.continue_prompt = prompt_continuer(*target, o, replies);
  }
  std::vector<TrainingRow> rows = parse_training_rows(data, o.data_file, tokenizer, o.model_dir, dataset);
  if (o.regenerate && o.progress) log_progress_done();
  if (replies) sum.replies_reused = replies->reused();
  target->set_aux_layers(capture);  // sorted: the final state comes last
  const int64_t n_aux = static_cast<int64_t>(aux.size());
  apply_budget(rows, o.max_tokens);
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!in_part(static_cast<int64_t>(r) / o.rows_per_shard)) continue;  // another part's placeholder
    sum.tokens += static_cast<int64_t>(rows[r].ids.size());
    sum.trained_tokens += std::count(rows[r].loss_mask.begin(), rows[r].loss_mask.end(), 1);
    ++sum.rows;
  }
  sum.shards = (static_cast<int64_t>(rows.size()) + o.rows_per_shard - 1) / o.rows_per_shard;
  if (sum.trained_tokens == 0)  // shards a trainer could not learn from: refused before they are written
    fail(o.data_file, ": no token would be trained (", sum.rows, o.parts > 1 ? " rows of this part, " : " rows, ",
         sum.tokens,
         " tokens, every loss mask empty): messages rows train only their assistant turns and prompt rows only their "
         "completion; add assistant turns or completions, or use {\"text\": ...} rows");

  nlohmann::json manifest = {
      {"format", "eaglet-extract/1"},         {"settings", settings}, {"rows", sum.rows}, {"tokens", sum.tokens},
      {"trained_tokens", sum.trained_tokens}, {"shards", sum.shards}};
  if (o.parts > 1) manifest["part"] = part;
  const auto write_manifest = [&] {
    manifest["shard_files"] = shard_files;
    write_file_atomic(manifest_path.string(), manifest.dump(2) + "\n");
  };
  write_manifest();

  Progress progress(o.progress, sum.tokens);
  int64_t done = 0, computed = 0;
  for (int64_t k = 0; k < sum.shards; ++k) {
    if (!in_part(k)) continue;
    const size_t begin = static_cast<size_t>(k * o.rows_per_shard);
    const size_t end = std::min(rows.size(), begin + static_cast<size_t>(o.rows_per_shard));
    int64_t tokens = 0;
    for (size_t r = begin; r < end; ++r) tokens += static_cast<int64_t>(rows[r].ids.size());
    const std::string name = shard_name(k), path = (fs::path(o.out_dir) / name).string();
    const std::string damage = path_exists(path) ? shard_damage(path, shard_files.value(name, nlohmann::json())) : "";
    if (path_exists(path) && damage.empty()) {
      ++sum.shards_skipped;
    } else {
      if (!damage.empty()) {
        log_info("extract: " + path + ": " + damage + ": extracted again");
        ++sum.shards_redone;
      }
      write_shard(*target, rows, begin, end, n_aux, o.prefill_batch, path, settings);
      shard_files[name] = {{"bytes", fs::file_size(path)}, {"sha256", sha256_file(path)}};
      write_manifest();
      computed += tokens;
    }
    done += tokens;
    progress.update(done, computed, k + 1, sum.shards);
  }
  progress.finish();

  // The draft vocabulary from the loss-masked tokens of the whole extraction (a part's is counted at the merge).
  const int64_t n = o.draft_vocab > 0 ? o.draft_vocab : std::min<int64_t>(32000, c.vocab_size);
  sum.seconds = timer.seconds();
  if (o.parts > 1) {
    log_info(strprintf("extract: part %d of %d in %s; join the parts with: eaglet extract-merge --out DIR PART_DIRS...",
                       o.part, o.parts, o.out_dir.c_str()));
    return sum;
  }
  const DraftVocab vocab = draft_vocab_of_rows(rows, c.vocab_size, n);
  write_draft_vocab((fs::path(o.out_dir) / "draft_vocab.safetensors").string(), vocab);
  sum.draft_vocab = n;
  sum.distinct_trained_ids = vocab.distinct;
  sum.draft_vocab_coverage = vocab.coverage;
  sum.seconds = timer.seconds();
  return sum;
}

namespace {

// A shard into the merged folder: a hard link where the part is on the same file system, else a copy.
void link_or_copy(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_hard_link(from, to, ec);
  if (!ec) return;
  const fs::path tmp = to.string() + ".tmp";
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::rename(tmp, to, ec);
  if (ec) fail(to.string(), ": cannot copy ", from.string(), " here: ", ec.message());
}

}  // namespace

ExtractSummary merge_extraction_parts(const std::vector<std::string>& part_dirs, const std::string& out_dir,
                                      int64_t draft_vocab) {
  Timer timer;
  ExtractSummary sum;
  std::vector<nlohmann::json> manifests;
  for (const std::string& dir : part_dirs) {
    const std::string path = (fs::path(dir) / "manifest.json").string();
    if (!path_exists(path)) fail(dir, ": no manifest.json: not a part written by eaglet extract --shard I/N");
    nlohmann::json m = read_json_file(path);
    if (!m.is_object() || !m.contains("part") || !m["part"].is_object())
      fail(path, ": not a part of a sharded extraction (no 'part'); only parts made with --shard I/N are merged");
    if (!m.contains("shards") || !m.contains("shard_files"))
      fail(path, ": this part did not finish; rerun its `eaglet extract --shard` command, it resumes");
    manifests.push_back(std::move(m));
  }
  const nlohmann::json& first = manifests[0];
  const int64_t parts = first["part"].value("count", int64_t{0}), shards = first.value("shards", int64_t{0});
  if (shards < 1 || shards > (1 << 20))
    fail(part_dirs[0], "/manifest.json: 'shards' must be in [1, 2^20], found ", shards);
  if (static_cast<int64_t>(part_dirs.size()) != parts)
    fail(part_dirs[0], ": part of ", parts, " parts, but ", part_dirs.size(), " folders given; give every part once");
  std::vector<bool> seen(static_cast<size_t>(parts), false);
  nlohmann::json shard_files = nlohmann::json::object();
  for (size_t i = 0; i < manifests.size(); ++i) {
    const nlohmann::json& m = manifests[i];
    const std::string path = (fs::path(part_dirs[i]) / "manifest.json").string();
    if (m["settings"] != first["settings"] || m.value("shards", int64_t{-1}) != shards ||
        m["part"].value("count", int64_t{0}) != parts)
      fail(path, ": extracted with other settings than ", part_dirs[0],
           " (target, data, layers, limits); the parts of ", "one extraction share every setting");
    const int64_t index = m["part"].value("index", int64_t{-1});
    if (index < 0 || index >= parts || seen[static_cast<size_t>(index)])
      fail(path, ": part ", index, " of ", parts, " is given twice or is out of range");
    seen[static_cast<size_t>(index)] = true;
    if (!m["shard_files"].is_object()) fail(path, ": 'shard_files' must be an object {name: {bytes, sha256}}");
    for (const auto& [name, recorded] : m["shard_files"].items()) {
      // Only this part's own shard names: nothing else is linked into the merged folder.
      const std::string digits = name.size() > 18 ? name.substr(6, name.size() - 18) : "";
      const int64_t k =
          !digits.empty() && digits.size() <= 9 && digits.find_first_not_of("0123456789") == std::string::npos
              ? std::stoll(digits)
              : -1;
      if (k < 0 || k >= shards || shard_name(k) != name || k % parts != index || shard_files.contains(name))
        fail(path, ": shard_files names '", name, "', not a shard of part ", index, " of ", parts, " (", shards,
             " shards)");
      verify_shard_file((fs::path(part_dirs[i]) / name).string(), recorded, path);
      shard_files[name] = recorded;
    }
    sum.rows += m.value("rows", int64_t{0});
    sum.tokens += m.value("tokens", int64_t{0});
    sum.trained_tokens += m.value("trained_tokens", int64_t{0});
  }
  for (int64_t k = 0; k < shards; ++k)
    if (!shard_files.contains(shard_name(k)))
      fail(part_dirs[static_cast<size_t>(k % parts)], ": ", shard_name(k),
           " is missing: that part did not finish; rerun its `eaglet extract --shard` command, it resumes");

  create_output_dir(out_dir);
  if (path_exists((fs::path(out_dir) / "manifest.json").string()))
    fail(out_dir, ": already holds an extraction (manifest.json); merge into a new folder");
  for (size_t i = 0; i < manifests.size(); ++i)
    for (const auto& [name, recorded] : manifests[i]["shard_files"].items())
      link_or_copy(fs::path(part_dirs[i]) / name, fs::path(out_dir) / name);

  // The draft vocabulary of the whole extraction, from every shard's trained ids (as one process counts them).
  const int64_t vocab_size = first["settings"].value("target_vocab_size", int64_t{0});
  std::vector<TrainingRow> rows(1);
  for (int64_t k = 0; k < shards; ++k) {
    const auto file = SafetensorsFile::open((fs::path(out_dir) / shard_name(k)).string());
    const auto tensor = [&](const char* name) {  // copied: a tensor's bytes need not be 8-byte aligned
      const auto t = file->tensors().find(name);
      if (t == file->tensors().end() || t->second.dtype != DType::I64 || t->second.shape.size() != 1)
        fail(file->path(), ": no 1-D I64 ", name, " (not a shard written by eaglet extract)");
      std::vector<int64_t> v(static_cast<size_t>(t->second.shape[0]));
      std::memcpy(v.data(), t->second.data, v.size() * sizeof(int64_t));
      return v;
    };
    const std::vector<int64_t> ids = tensor("input_ids"), mask = tensor("loss_mask");
    if (mask.size() != ids.size()) fail(file->path(), ": loss_mask and input_ids differ in length");
    const int64_t T = static_cast<int64_t>(ids.size());
    for (int64_t t = 0; t < T; ++t) {
      if (ids[t] < 0 || ids[t] >= vocab_size) fail(file->path(), ": input_ids[", t, "] is outside the vocabulary");
      rows[0].ids.push_back(static_cast<int32_t>(ids[t]));
      rows[0].loss_mask.push_back(mask[t] != 0);
    }
  }
  const int64_t n = draft_vocab > 0 ? draft_vocab : std::min<int64_t>(32000, vocab_size);
  const DraftVocab vocab = draft_vocab_of_rows(rows, vocab_size, n);
  write_draft_vocab((fs::path(out_dir) / "draft_vocab.safetensors").string(), vocab);
  nlohmann::json merged_from = nlohmann::json::array();
  for (const std::string& dir : part_dirs) merged_from.push_back(fs::absolute(dir).lexically_normal().string());
  const nlohmann::json manifest = {{"format", "eaglet-extract/1"},
                                   {"settings", first["settings"]},
                                   {"rows", sum.rows},
                                   {"tokens", sum.tokens},
                                   {"trained_tokens", sum.trained_tokens},
                                   {"shards", shards},
                                   {"shard_files", shard_files},
                                   {"merged_from", merged_from}};
  write_file_atomic((fs::path(out_dir) / "manifest.json").string(), manifest.dump(2) + "\n");
  sum.shards = shards;
  sum.draft_vocab = n;
  sum.distinct_trained_ids = vocab.distinct;
  sum.draft_vocab_coverage = vocab.coverage;
  sum.seconds = timer.seconds();
  return sum;
}

}  // namespace eaglet
