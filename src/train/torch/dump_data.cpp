#include "train/torch/dump_data.h"

#include <unistd.h>

#include <torch/torch.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "io/files.h"
#include "io/fingerprint.h"
#include "io/json_util.h"
#include "io/safetensors.h"
#include "model/block.h"
#include "model/transformer.h"
#include "train/draft_vocab.h"
#include "train/shards.h"
#include "util/error.h"
#include "util/log.h"

namespace eaglet {

namespace {

namespace fs = std::filesystem;

enum class Layout { Speculators, SpeculatorsLegacy, SpecForge };

const char* layout_name(Layout l) {
  return l == Layout::Speculators         ? "speculators (hs_{i}.safetensors)"
         : l == Layout::SpeculatorsLegacy ? "speculators legacy (data_{i}.pt)"
                                          : "specforge (data_{i}.ckpt)";
}

struct DumpFile {
  int64_t index = 0;
  std::string path;
};

// Files named PREFIX{index}SUFFIX directly in `dir`, by index (not as strings: data_10 comes after data_2).
void list_files(const fs::path& dir, const std::regex& name, std::vector<DumpFile>& out) {
  if (!is_directory_path(dir.string())) return;  // a symlink loop: an Error naming it
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string f = e.path().filename().string();
    std::error_code ec;  // a symlink loop among the files is not a dump file (not an exception)
    if (e.is_regular_file(ec) && std::regex_match(f, m, name))
      out.push_back({std::stoll(m[1].str()), e.path().string()});
  }
}

std::vector<DumpFile> find_files(const std::string& dir, Layout layout) {
  std::vector<DumpFile> files;
  if (layout == Layout::Speculators) {
    const std::regex name("hs_([0-9]{1,15})\\.safetensors");
    list_files(dir, name, files);
    list_files(fs::path(dir) / "hidden_states", name, files);
  } else if (layout == Layout::SpeculatorsLegacy) {
    list_files(dir, std::regex("data_([0-9]{1,15})\\.pt"), files);
  } else {
    const std::regex name("data_([0-9]{1,15})\\.ckpt(\\.gz)?");
    list_files(dir, name, files);
    if (is_directory_path(dir))
      for (const auto& e : fs::directory_iterator(dir))
        if (std::error_code ec; e.is_directory(ec) && e.path().filename().string().rfind("rows_", 0) == 0)
          list_files(e.path(), name, files);
  }
  std::sort(files.begin(), files.end(), [](const DumpFile& a, const DumpFile& b) { return a.index < b.index; });
  for (size_t i = 1; i < files.size(); ++i)
    if (files[i].index == files[i - 1].index)
      fail(files[i].path, ": row ", files[i].index, " is also in ", files[i - 1].path, " (keep one of them)");
  return files;
}

std::vector<char> file_bytes(const std::string& path) {
  std::vector<char> bytes;
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    const int fd = open_regular_file(path);  // a FIFO or device: an Error naming it, not a wait
    gzFile f = gzdopen(fd, "rb");
    if (f == nullptr) {
      ::close(fd);
      fail(path, ": cannot open");
    }
    char buf[1 << 16];
    int n;
    while ((n = gzread(f, buf, sizeof buf)) > 0) bytes.insert(bytes.end(), buf, buf + n);
    const bool bad = n < 0;
    gzclose(f);
    if (bad) fail(path, ": not a valid gzip file");
    return bytes;
  }
  const std::string s = read_file(path);
  return {s.begin(), s.end()};
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

c10::Dict<c10::IValue, c10::IValue> load_torch_dict(const std::string& path) {
  c10::IValue v;
  try {
    v = torch::pickle_load(file_bytes(path));
  } catch (const c10::Error& e) {
    fail(path, ": not a torch.save file libtorch can read (", first_line(e.what_without_backtrace()), ")");
  }
  if (!v.isGenericDict()) fail(path, ": holds a ", v.tagKind(), ", expected the dict torch.save wrote");
  return v.toGenericDict();
}

c10::IValue dict_get(const c10::Dict<c10::IValue, c10::IValue>& d, const std::string& path, const std::string& key) {
  const auto it = d.find(c10::IValue(key));
  if (it == d.end()) {
    std::string keys;
    for (const auto& e : d) keys += (keys.empty() ? "" : ", ") + (e.key().isString() ? e.key().toStringRef() : "?");
    fail(path, ": no key '", key, "' (keys: ", keys, "); not a dump in the layout of --data-format");
  }
  return it->value();
}

std::string sizes_str(const torch::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

torch::Tensor need_tensor(const c10::IValue& v, const std::string& path, const std::string& key) {
  if (!v.isTensor()) fail(path, ": '", key, "' is a ", v.tagKind(), ", expected a tensor");
  return v.toTensor();
}

// A [T] tensor of integers as int64.
torch::Tensor ids_tensor(const torch::Tensor& t, const std::string& path, const std::string& key, int64_t T) {
  if (t.is_floating_point() || t.is_complex() || t.dim() != 1 || (T >= 0 && t.size(0) != T))
    fail(path, ": '", key, "' is ", t.scalar_type(), " ", sizes_str(t), ", expected integers [",
         T >= 0 ? std::to_string(T) : "T", "]");
  return t.to(torch::kInt64).contiguous();
}

// A floating tensor of exactly `shape` (a leading batch dimension of 1 may be present) as fp32.
torch::Tensor states_tensor(torch::Tensor t, const std::string& path, const std::string& key,
                            const std::vector<int64_t>& shape, const std::string& fix) {
  if (t.dim() == static_cast<int64_t>(shape.size()) + 1 && t.size(0) == 1) t = t.squeeze(0);
  if (!t.is_floating_point() || t.sizes().vec() != shape)
    fail(path, ": '", key, "' is ", t.scalar_type(), " ", sizes_str(t), ", expected floating ", shape_str(shape), fix);
  return t.to(torch::kFloat32).contiguous();
}

struct RowTensors {
  torch::Tensor ids, mask, aux, final_hidden;  // [T] i64, [T] i64, [T, n_aux * H] f32, [T, H] f32
  std::string dtype;
};

struct Shape {
  int64_t H = 0;
  int n_aux = 0;
  bool mask_all = false;
};

RowTensors load_speculators(const std::string& path, const Shape& s) {
  const auto f = SafetensorsFile::open(path);
  const auto find = [&](const std::string& key) -> const TensorView& {
    const auto it = f->tensors().find(key);
    if (it == f->tensors().end())
      fail(path, ": no tensor '", key, "' (a speculators dump holds hidden_states [T, K, H] and token_ids [T])");
    return it->second;
  };
  const TensorView& ids = find("token_ids");
  const TensorView& hs = find("hidden_states");
  if (ids.dtype != DType::I64 || ids.shape.size() != 1)
    fail(path, ": token_ids is ", dtype_name(ids.dtype), " ", ids.shape_str(), ", expected I64 [T]");
  const int64_t T = ids.shape[0];
  if (hs.dtype == DType::I64 || hs.dtype == DType::I32 || hs.dtype == DType::BOOL || hs.shape.size() != 3 ||
      hs.shape[0] != T || hs.shape[1] != s.n_aux + 1 || hs.shape[2] != s.H)
    fail(path, ": hidden_states is ", dtype_name(hs.dtype), " ", hs.shape_str(), ", expected floating [", T, ", ",
         s.n_aux + 1, ", ", s.H, "] (", s.n_aux,
         " aux layers from --dump-layers, then the final state); give "
         "--dump-layers the ids the dump was made with");
  RowTensors r;
  r.ids = torch::empty({T}, torch::kInt64);
  std::memcpy(r.ids.data_ptr<int64_t>(), ids.data, static_cast<size_t>(T) * 8);  // the view may be unaligned
  r.mask = torch::ones({T}, torch::kInt64);
  const torch::Tensor h = torch::tensor(to_f32(&hs), torch::kFloat32).reshape({T, s.n_aux + 1, s.H});
  r.aux = h.narrow(1, 0, s.n_aux).reshape({T, s.n_aux * s.H}).contiguous();
  r.final_hidden = h.select(1, s.n_aux).contiguous();
  r.dtype = std::string(dtype_name(hs.dtype));
  return r;
}

RowTensors load_torch_row(const std::string& path, Layout layout, const Shape& s) {
  const auto d = load_torch_dict(path);
  RowTensors r;
  r.ids = ids_tensor(need_tensor(dict_get(d, path, "input_ids"), path, "input_ids"), path, "input_ids", -1);
  const int64_t T = r.ids.size(0);
  r.mask = ids_tensor(need_tensor(dict_get(d, path, "loss_mask"), path, "loss_mask"), path, "loss_mask", T);
  const std::string layers_fix = "; give --dump-layers the ids the dump was made with";
  if (layout == Layout::SpecForge) {
    const torch::Tensor aux = need_tensor(dict_get(d, path, "aux_hidden_state"), path, "aux_hidden_state");
    r.aux = states_tensor(aux, path, "aux_hidden_state", {T, s.n_aux * s.H},
                          " (" + std::to_string(s.n_aux) + " aux layers of " + std::to_string(s.H) + ")" + layers_fix);
    r.final_hidden = states_tensor(need_tensor(dict_get(d, path, "hidden_state"), path, "hidden_state"), path,
                                   "hidden_state", {T, s.H}, "");
    r.dtype = c10::toString(aux.scalar_type());
    return r;
  }
  const c10::IValue hs = dict_get(d, path, "hidden_states");
  if (!hs.isList() || static_cast<int>(hs.toList().size()) != s.n_aux + 1)
    fail(path, ": 'hidden_states' is ", hs.isList() ? std::to_string(hs.toList().size()) + " tensors" : hs.tagKind(),
         ", expected a list of ", s.n_aux + 1, " tensors [T, H] (the layer_ids of data_config.json)");
  std::vector<torch::Tensor> slots;
  const auto list = hs.toList();
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string key = "hidden_states[" + std::to_string(i) + "]";
    slots.push_back(states_tensor(need_tensor(list.get(i), path, key), path, key, {T, s.H}, ""));
  }
  r.dtype = c10::toString(need_tensor(list.get(0), path, "hidden_states[0]").scalar_type());
  r.final_hidden = slots.back();
  slots.pop_back();
  r.aux = torch::cat(slots, 1).contiguous();
  return r;
}

RowTensors load_row(const std::string& path, Layout layout, const Shape& s) {
  RowTensors r = layout == Layout::Speculators ? load_speculators(path, s) : load_torch_row(path, layout, s);
  if (layout == Layout::Speculators && !s.mask_all)
    fail(path,
         ": speculators keeps the loss mask in its Arrow dataset, which eaglet does not read; pass "
         "--dump-loss-mask all to train on every token");
  if (s.mask_all) r.mask = torch::ones_like(r.mask);
  return r;
}

std::vector<int> parse_ids(const std::string& text, const std::string& what) {
  std::vector<int> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      ids.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      fail(what, ": '", item, "' is not a layer id (expected a comma-separated list such as 2,16,29, or default)");
    }
  }
  return ids;
}

std::string ids_str(const std::vector<int>& ids) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < ids.size(); ++i) s << (i > 0 ? "," : "") << ids[i];
  s << ']';
  return s.str();
}

// The aux layers as HF hidden_states ids (R[k], the input of layer k), from the dump's own convention.
std::vector<int> resolve_layers(const DataSourceOptions& o, Layout layout, int L) {
  std::vector<int> given;
  std::string convention;
  if (layout == Layout::SpeculatorsLegacy) {
    // data_config.json hidden_states.layer_ids: layer outputs (R[j + 1]); the last one is the final state.
    const std::string path = (fs::path(o.dir) / "data_config.json").string();
    std::vector<int> recorded;
    if (path_exists(path)) {
      const nlohmann::json c = read_json_file(path);
      if (!c.contains("hidden_states") || !c["hidden_states"].contains("layer_ids") ||
          !c["hidden_states"]["layer_ids"].is_array())
        fail(path, ": no hidden_states.layer_ids list");
      for (const auto& v : c["hidden_states"]["layer_ids"]) recorded.push_back(v.get<int>());
    }
    if (!o.layers.empty() && o.layers != "default") given = parse_ids(o.layers, "--dump-layers");
    if (recorded.empty() && given.empty())
      fail(path,
           ": missing, and no --dump-layers: the layer ids of a legacy speculators dump are needed (as in its "
           "data_config.json: layer outputs, the last one L-1 for the final state)");
    if (!recorded.empty() && !given.empty() && recorded != given)
      fail("--dump-layers ", ids_str(given), " disagrees with ", path, " ", ids_str(recorded), "; drop the flag");
    if (given.empty()) given = recorded;
    if (given.size() < 2 || given.back() != L - 1)
      fail(o.dir, ": legacy speculators layer ids ", ids_str(given), " must end with ", L - 1,
           " (the last layer's output, the final state) after at least one aux layer");
    given.pop_back();
    for (int& g : given) g += 1;
    return given;
  }
  const bool vllm = layout == Layout::Speculators;
  const std::vector<int> defaults = vllm ? std::vector<int>{2, L / 2, L - 3} : std::vector<int>{1, L / 2 - 1, L - 4};
  if (o.layers.empty())
    fail("--dump-layers is required for ", layout_name(layout),
         ": the files do not record which layers they hold. "
         "Pass the ids given to ",
         vllm ? "speculators (--target-layer-ids, without the final layer)" : "SpecForge",
         ", or `default` for its default ", ids_str(defaults), " of this ", L, "-layer target");
  given = o.layers == "default" ? defaults : parse_ids(o.layers, "--dump-layers");
  if (!vllm)
    for (int& g : given) g += 1;  // SGLang names a layer's output: id j is R[j + 1]
  return given;
}

// Relative Frobenius difference of a [n, H] block against b.
double rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-12);
}

// The dump's first row against the target's own forward on its first tokens: each aux slot must hold the layer
// declared, the final state the norm state declared.
void check_against_target(const std::string& path, const RowTensors& row, const std::vector<int>& aux, bool normed,
                          Transformer& target, double tol, const std::string& layers_flag) {
  const ModelConfig& c = target.config();
  const int L = static_cast<int>(c.num_layers);
  const int64_t H = c.hidden_size, n = std::min<int64_t>(64, row.ids.size(0));
  std::vector<int> all;
  for (int k = 0; k <= L; ++k) all.push_back(k);
  const std::vector<int> saved = target.aux_layers();
  target.set_aux_layers(all);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) ids[static_cast<size_t>(t)] = static_cast<int32_t>(row.ids[t].item<int64_t>());
  KVCache cache = target.make_cache(n);
  target.forward(cache, {.tokens = {ids.data(), ids.size()}});
  const torch::Tensor R =
      torch::tensor(std::vector<float>(target.aux_hidden().begin(), target.aux_hidden().end()), torch::kFloat32)
          .reshape({n, L + 1, H});
  target.set_aux_layers(saved);
  const auto best_match = [&](const torch::Tensor& x, int* best) {
    double err = 1e300;
    for (int k = 0; k <= L; ++k) {
      const double e = rel_diff(x, R.select(1, k));
      if (e < err) err = e, *best = k;
    }
    return err;
  };
  for (size_t i = 0; i < aux.size(); ++i) {
    const torch::Tensor slot = row.aux.narrow(0, 0, n).narrow(1, static_cast<int64_t>(i) * H, H);
    const double e = rel_diff(slot, R.select(1, aux[i]));
    int best = -1;
    const double be = best_match(slot, &best);
    if (e > tol)
      fail(path, ": aux slot ", i, " should be hidden_states[", aux[i], "] of ", c.dir, " (from --dump-layers ",
           layers_flag, ") but differs by ", e, " (tolerance ", tol, "); its closest layer is hidden_states[", best,
           "] (", be, "): fix --dump-layers (mind the framework's layer numbering) or use the dump's own target");
  }
  const torch::Tensor fin = row.final_hidden.narrow(0, 0, n), pre = R.select(1, L);
  const torch::Tensor post = pre * torch::rsqrt(pre.pow(2).mean(-1, true) + c.rms_norm_eps) *
                             torch::tensor(target.final_norm(), torch::kFloat32);
  const double e_pre = rel_diff(fin, pre), e_post = rel_diff(fin, post);
  if ((normed ? e_post : e_pre) > tol) {
    const bool other = (normed ? e_pre : e_post) <= tol;
    fail(path, ": the final state is declared ", normed ? "post-norm" : "pre-norm",
         " but differs from the target's by ", normed ? e_post : e_pre, " (tolerance ", tol, ")",
         other ? std::string("; it is the ") + (normed ? "pre-norm" : "post-norm") + " state: pass --dump-final " +
                     (normed ? "pre-norm" : "post-norm")
               : std::string("; it is neither norm state of ") + c.dir + ": was the dump made with this target?");
  }
}

class DumpData : public TrainingData {
 public:
  DumpData(const DataSourceOptions& o, Layout layout, Transformer& target) : layout_(layout) {
    const ModelConfig& c = target.config();
    dir_ = o.dir;
    hidden_ = c.hidden_size;
    vocab_ = c.vocab_size;
    if (o.loss_mask != "" && o.loss_mask != "all")
      fail("--dump-loss-mask must be `all` (or absent), found '", o.loss_mask, "'");
    if (o.final_state != "" && o.final_state != "pre-norm" && o.final_state != "post-norm")
      fail("--dump-final must be pre-norm or post-norm, found '", o.final_state, "'");
    final_normed_ = o.final_state.empty() ? layout == Layout::SpecForge : o.final_state == "post-norm";
    aux_layers_ = resolve_layers(o, layout, static_cast<int>(c.num_layers));
    for (size_t i = 0; i < aux_layers_.size(); ++i)
      if (aux_layers_[i] < 1 || aux_layers_[i] >= c.num_layers || (i > 0 && aux_layers_[i] <= aux_layers_[i - 1]))
        fail("--dump-layers ", o.layers, " gives hidden_states ids ", ids_str(aux_layers_),
             ": they must ascend in [1, ", c.num_layers - 1, "] for this ", c.num_layers, "-layer target");
    shape_ = {hidden_, static_cast<int>(aux_layers_.size()), o.loss_mask == "all"};
    files_ = find_files(o.dir, layout);
    if (files_.empty()) fail(o.dir, ": no ", layout_name(layout), " files");
    std::vector<int64_t> counts(static_cast<size_t>(vocab_), 0);
    for (size_t f = 0; f < files_.size(); ++f) {
      const std::string& path = files_[f].path;
      const RowTensors r = load_row(path, layout, shape_);
      if (f == 0) {
        check_against_target(path, r, aux_layers_, final_normed_, target, o.check_tolerance, o.layers);
        dtype_ = r.dtype;
      }
      const int64_t T = r.ids.size(0);
      std::vector<int64_t> ids(r.ids.data_ptr<int64_t>(), r.ids.data_ptr<int64_t>() + T);
      std::vector<uint8_t> mask(static_cast<size_t>(T));
      const int64_t* masks = r.mask.data_ptr<int64_t>();
      for (int64_t t = 0; t < T; ++t) {
        const int64_t id = ids[static_cast<size_t>(t)], m = masks[t];
        if (id < 0 || id >= vocab_)
          fail(path, ": input_ids[", t, "] = ", id, " is outside the vocabulary [0, ", vocab_, ") of ", c.dir);
        if (m != 0 && m != 1) fail(path, ": loss_mask[", t, "] = ", m, ", expected 0 or 1");
        mask[static_cast<size_t>(t)] = static_cast<uint8_t>(m);
        if (m != 0) ++counts[static_cast<size_t>(id)];
      }
      tokens_ += T;
      ids_.push_back(std::move(ids));
      masks_.push_back(std::move(mask));
    }
    const int64_t n = o.draft_vocab > 0 ? o.draft_vocab : std::min<int64_t>(32000, vocab_);
    if (n > vocab_) fail("--draft-vocab ", n, " is larger than the target vocabulary ", vocab_);
    const DraftVocab v = build_draft_vocab(counts, n);
    d2t_ = v.d2t;
    t2d_ = v.t2d;
    log_info(
        strprintf("train-draft: %s, %zu files, %lld tokens, %s; aux layers hidden_states %s; final state %s; draft "
                  "vocabulary %lld from the loss-masked tokens (coverage %.1f%%); checked against the target",
                  layout_name(layout), files_.size(), static_cast<long long>(tokens_), dtype_.c_str(),
                  ids_str(aux_layers_).c_str(), final_normed_ ? "post-norm" : "pre-norm", static_cast<long long>(n),
                  100.0 * v.coverage));
  }

  std::vector<SequenceRef> sequences(int64_t max_length) const override {
    std::vector<SequenceRef> out;
    for (size_t f = 0; f < ids_.size(); ++f)
      cut_rows(static_cast<int32_t>(f), {0, static_cast<int64_t>(ids_[f].size())}, max_length, out);
    return out;
  }

  void read(const SequenceRef& s, int64_t from, int64_t n, int64_t* ids, float* mask, float* aux,
            float* final_hidden) const override {
    const size_t f = static_cast<size_t>(s.shard);
    const int64_t t0 = s.begin + from;
    for (int64_t i = 0; i < n; ++i) {
      if (ids) ids[i] = ids_.at(f)[static_cast<size_t>(t0 + i)];
      if (mask) mask[i] = masks_.at(f)[static_cast<size_t>(t0 + i)];
    }
    if (aux == nullptr && final_hidden == nullptr) return;
    if (cached_ != s.shard) {  // one row's states at a time: a dump may be far larger than memory
      cache_ = load_row(files_.at(f).path, layout_, shape_);
      cached_ = s.shard;
    }
    const int64_t W = shape_.n_aux * hidden_;
    if (aux) std::copy_n(cache_.aux.data_ptr<float>() + t0 * W, n * W, aux);
    if (final_hidden) std::copy_n(cache_.final_hidden.data_ptr<float>() + t0 * hidden_, n * hidden_, final_hidden);
  }

 private:
  std::string dtype_;
  Layout layout_;
  Shape shape_;
  std::vector<DumpFile> files_;
  std::vector<std::vector<int64_t>> ids_;
  std::vector<std::vector<uint8_t>> masks_;
  mutable int32_t cached_ = -1;
  mutable RowTensors cache_;
};

std::unique_ptr<TrainingData> open_extracted(const std::string& dir, const ModelConfig& tc) {
  auto data = std::make_unique<ExtractedData>(ExtractedData::open(dir));
  const nlohmann::json& s = data->settings();
  const std::string manifest = (fs::path(dir) / "manifest.json").string();
  if (data->hidden_size() != tc.hidden_size || data->vocab_size() != tc.vocab_size ||
      json_int(s, manifest, "target_num_layers", -1) != tc.num_layers)
    fail(manifest, ": extracted from another target (hidden ", data->hidden_size(), ", vocabulary ", data->vocab_size(),
         ", ", json_int(s, manifest, "target_num_layers", -1), " layers) than ", tc.dir, " (", tc.hidden_size, ", ",
         tc.vocab_size, ", ", tc.num_layers, "); extract again with -m ", tc.dir);
  const std::string recorded = json_string(s, manifest, "target_fingerprint", "");
  if (recorded.empty()) {
    log_info(manifest + ": no target fingerprint (extracted before 2026-12): the target is checked by its shape only");
  } else if (const std::string mine = model_fingerprint(tc.dir); mine != recorded) {
    fail(manifest, ": extracted from another checkpoint than ", tc.dir, " (target fingerprint ", recorded.substr(0, 16),
         "... recorded, ", mine.substr(0, 16),
         "... here: other weights, a quantized copy or an edited config.json, "
         "with the same shape); train with the target the features came from (",
         json_string(s, manifest, "target", "?"), "), or extract again with -m ", tc.dir);
  }
  return data;
}

}  // namespace

std::string detect_data_format(const std::string& dir) {
  require_directory(dir, "--data names the folder of the training data");
  std::vector<std::string> found;
  if (path_exists((fs::path(dir) / "manifest.json").string())) found.push_back("eaglet (manifest.json)");
  for (Layout l : {Layout::Speculators, Layout::SpeculatorsLegacy, Layout::SpecForge})
    if (!find_files(dir, l).empty()) found.push_back(layout_name(l));
  if (found.empty())
    fail(dir,
         ": holds no training data: not a folder written by `eaglet extract` (run it first: eaglet extract -m "
         "TARGET --data FILE.jsonl --out ",
         dir,
         "), nor a speculators (hs_{i}.safetensors, data_{i}.pt) or "
         "SpecForge (data_{i}.ckpt[.gz]) dump");
  if (found.size() > 1) {
    std::string list;
    for (const std::string& f : found) list += (list.empty() ? "" : ", ") + f;
    fail(dir, ": holds several kinds of training data (", list, "); choose one with --data-format");
  }
  return found[0].substr(0, found[0].find(' '));
}

std::unique_ptr<TrainingData> open_training_data(const DataSourceOptions& o, Transformer& target) {
  std::string format = o.format;
  if (format.empty()) {
    format = detect_data_format(o.dir);
    log_info(strprintf("train-draft: --data-format %s (detected in %s)", format.c_str(), o.dir.c_str()));
  }
  if (format == "eaglet") {
    if (!o.layers.empty() || !o.final_state.empty() || !o.loss_mask.empty())
      fail(
          "--dump-layers, --dump-final and --dump-loss-mask describe speculators or SpecForge dumps; eaglet extract "
          "records its own layers (drop them)");
    return open_extracted(o.dir, target.config());
  }
  if (format == "specforge") return std::make_unique<DumpData>(o, Layout::SpecForge, target);
  if (format != "speculators") fail("--data-format must be eaglet, speculators or specforge, found '", format, "'");
  const bool current = !find_files(o.dir, Layout::Speculators).empty();
  const bool legacy = !find_files(o.dir, Layout::SpeculatorsLegacy).empty();
  if (current && legacy) fail(o.dir, ": holds both hs_{i}.safetensors and data_{i}.pt; keep one speculators layout");
  return std::make_unique<DumpData>(o, legacy ? Layout::SpeculatorsLegacy : Layout::Speculators, target);
}

}  // namespace eaglet
