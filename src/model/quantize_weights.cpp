#include "model/quantize_weights.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "io/files.h"
#include "io/json_util.h"
#include "kernels/quantized.h"
#include "model/architecture.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet {

namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

bool is_float(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

// v as the float dtype `t` stores it.
float round_to(DType t, float v) {
  if (t == DType::BF16) return bf16_to_f32(f32_to_bf16(v));
  if (t == DType::F16) return f16_to_f32(f32_to_f16(v));
  return v;
}

void store(DType t, void* out, int64_t i, float v) {
  if (t == DType::F32) {
    static_cast<float*>(out)[i] = v;
    return;
  }
  static_cast<uint16_t*>(out)[i] = t == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
}

int64_t columns_per_scale(const QuantScheme& s, int64_t cols) {
  return s.format == WeightFormat::Int4Group ? s.group : cols;
}

// Row r as fp32 (non-finite values are an Error naming the element: no scale can represent them).
void load_row(const TensorView& w, int64_t r, float* out) {
  const int64_t cols = w.dim(1);
  for (int64_t c = 0; c < cols; ++c) {
    out[c] = load_as_f32(w.data, w.dtype, r * cols + c);
    if (!std::isfinite(out[c]))
      fail(w.file, ": '", w.name, "' holds ", out[c], " at [", r, ", ", c, "]: cannot be quantized");
  }
}

void row_scales(const TensorView& w, int64_t r, const float* row, const QuantScheme& s, float* scales) {
  const int64_t cols = w.dim(1), per = columns_per_scale(s, cols);
  const float half_range = static_cast<float>((1 << s.bits()) - 1) / 2.0f;
  for (int64_t g = 0; g < cols / per; ++g) {
    float absmax = 0.0f;
    for (int64_t c = g * per; c < (g + 1) * per; ++c) absmax = std::max(absmax, std::fabs(row[c]));
    scales[g] = round_to(w.dtype, std::max(absmax / half_range, FLT_EPSILON));
    if (!std::isfinite(scales[g]))
      fail(w.file, ": '", w.name, "' row ", r, ": the scale of absmax ", absmax, " overflows ", dtype_name(w.dtype));
  }
}

// Rows [r0, r1) of `w` as the stored scales (in w's dtype) into `scales_out`, and the codes (I8 [rows, cols], or I32
// words of eight nibbles [rows, cols / 8]) into `codes_out`; either may be null.
void quantize_rows(const TensorView& w, const QuantScheme& s, int64_t r0, int64_t r1, void* scales_out,
                   void* codes_out) {
  const int64_t cols = w.dim(1), groups = s.groups_per_row(cols);
  std::vector<float> row(static_cast<size_t>(cols)), scales(static_cast<size_t>(groups));
  std::vector<int8_t> codes(static_cast<size_t>(cols));
  for (int64_t r = r0; r < r1; ++r) {
    if (codes_out == nullptr) {
      load_row(w, r, row.data());
      row_scales(w, r, row.data(), s, scales.data());
    } else {
      quantize_row(w, r, s, scales.data(), codes.data());
    }
    if (scales_out != nullptr)
      for (int64_t g = 0; g < groups; ++g) store(w.dtype, scales_out, r * groups + g, scales[static_cast<size_t>(g)]);
    if (codes_out == nullptr) continue;
    if (s.format == WeightFormat::Int8Channel) {
      std::memcpy(static_cast<int8_t*>(codes_out) + r * cols, codes.data(), static_cast<size_t>(cols));
      continue;
    }
    for (int64_t word = 0; word < cols / 8; ++word) {
      uint32_t packed = 0;
      for (int i = 0; i < 8; ++i)
        packed |= static_cast<uint32_t>(codes[static_cast<size_t>(word * 8 + i)] + 8) << (4 * i);
      std::memcpy(static_cast<std::byte*>(codes_out) + 4 * (r * (cols / 8) + word), &packed, 4);
    }
  }
}

void quantize_all_rows(const TensorView& w, const QuantScheme& s, void* scales_out, void* codes_out) {
  std::mutex mutex;
  std::string error;  // the pool's workers must not throw: the first error is raised on the calling thread
  thread_pool().parallel_for(
      static_cast<size_t>(w.dim(0)),
      [&](size_t b, size_t e, int) {
        try {
          quantize_rows(w, s, static_cast<int64_t>(b), static_cast<int64_t>(e), scales_out, codes_out);
        } catch (const Error& x) {
          const std::lock_guard<std::mutex> lock(mutex);
          if (error.empty()) error = x.what();
        }
      },
      16);
  if (!error.empty()) throw Error(error);
}

uint64_t bytes_of(const TensorToWrite& t) {
  uint64_t n = dtype_size(t.dtype);
  for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
  return n;
}

// The tensors a quantized Linear `w` (X.weight) is written as.
std::vector<TensorToWrite> quantized_tensors(const TensorView& w, const QuantScheme& s) {
  const std::string module = w.name.substr(0, w.name.size() - std::string(".weight").size());
  const int64_t rows = w.dim(0), cols = w.dim(1);
  TensorToWrite scales{module + ".weight_scale", w.dtype, {rows, s.groups_per_row(cols)}, nullptr, [&w, s](void* out) {
                         quantize_all_rows(w, s, out, nullptr);
                       }};
  if (s.format == WeightFormat::Int8Channel)
    return {{module + ".weight",
             DType::I8,
             {rows, cols},
             nullptr,
             [&w, s](void* out) { quantize_all_rows(w, s, nullptr, out); }},
            scales};
  return {{module + ".weight_packed",
           DType::I32,
           {rows, cols / 8},
           nullptr,
           [&w, s](void* out) { quantize_all_rows(w, s, nullptr, out); }},
          scales,
          {module + ".weight_shape", DType::I32, {2}, nullptr, [rows, cols](void* out) {
             const int32_t shape[2] = {static_cast<int32_t>(rows), static_cast<int32_t>(cols)};
             std::memcpy(out, shape, sizeof shape);
           }}};
}

ojson quantization_config(const QuantScheme& s, const std::string& tensor_prefix, bool lm_head) {
  const bool int4 = s.format == WeightFormat::Int4Group;
  ojson weights = {{"num_bits", s.bits()},
                   {"type", "int"},
                   {"symmetric", true},
                   {"strategy", int4 ? "group" : "channel"},
                   {"group_size", int4 ? ojson(s.group) : ojson(nullptr)},
                   {"dynamic", false},
                   {"observer", "minmax"},
                   {"actorder", nullptr},
                   {"block_structure", nullptr}};
  // eaglet quantizes activations per row at run time for both. int8 declares it (vLLM's int-quantized int8 scheme
  // is W8A8 with dynamic per-token activations); int4 stays weight-only W4A16, the scheme of Kimi's experts.
  ojson activations = nullptr;
  if (!int4)
    activations = {{"num_bits", 8},       {"type", "int"},   {"symmetric", true},
                   {"strategy", "token"}, {"dynamic", true}, {"observer", nullptr}};
  ojson group = {{"targets", {"Linear"}},
                 {"weights", weights},
                 {"input_activations", activations},
                 {"output_activations", nullptr}};
  return {{"config_groups", {{"group_0", group}}},
          {"format", int4 ? "pack-quantized" : "int-quantized"},
          {"ignore", lm_head ? ojson::array() : ojson::array({tensor_prefix + "lm_head"})},
          {"kv_cache_scheme", nullptr},
          {"quant_method", "compressed-tensors"},
          {"quantization_status", "compressed"}};
}

void check_output_folder(const QuantizeRequest& q) {
  if (!path_exists(q.out_dir)) return;  // a symlink loop or a path through a file: an Error naming it
  if (!is_directory_path(q.out_dir)) fail("--out ", q.out_dir, ": exists and is not a folder");
  if (path_exists(q.in_dir) && fs::equivalent(q.out_dir, q.in_dir))
    fail("--out ", q.out_dir, ": is the model folder being read (-m ", q.in_dir,
         "); write the quantized checkpoint to a new folder");
  if (!q.force && !fs::is_empty(q.out_dir))
    fail("--out ", q.out_dir, ": is not empty (it holds ",
         fs::directory_iterator(q.out_dir)->path().filename().string(),
         "); choose a new or empty folder, or pass --force to write into it");
}

// With --force, weight files of an earlier checkpoint in out_dir would be read together with the new ones.
void check_no_stale_weights(const std::string& out_dir, const std::set<std::string>& written) {
  if (!path_exists(out_dir)) return;
  for (const auto& e : fs::directory_iterator(out_dir)) {
    const std::string name = e.path().filename().string();
    if ((e.path().extension() == ".safetensors" || name == "model.safetensors.index.json") && !written.count(name))
      fail("--out ", out_dir, ": holds ", name,
           ", which the quantized checkpoint does not replace and a loader would "
           "read with it; remove it first");
  }
}

// Files of a model folder that are weights in another format (a loader might pick them instead).
bool is_weight_file(const fs::path& p) {
  static const std::set<std::string> weights = {".safetensors", ".bin",  ".pt", ".pth",
                                                ".gguf",        ".ckpt", ".h5", ".msgpack"};
  return weights.count(p.extension().string()) > 0;
}

QuantizeRequest::Layout target_layout(const std::string& dir) {
  const ModelConfig c = ModelConfig::load(dir);
  return {architecture_for(c.model_type, c.file).tensors(c), c.tensor_prefix, c.model_type + " model " + c.dir,
          c.tie_word_embeddings};
}

}  // namespace

std::string QuantScheme::name() const {
  return format == WeightFormat::Int4Group ? "int4 group " + std::to_string(group) : "int8 per channel";
}

void quantize_row(const TensorView& w, int64_t r, const QuantScheme& s, float* scales, int8_t* codes) {
  const int64_t cols = w.dim(1), per = columns_per_scale(s, cols);
  const int qmax = (1 << (s.bits() - 1)) - 1, qmin = -qmax - 1;
  std::vector<float> row(static_cast<size_t>(cols));
  load_row(w, r, row.data());
  row_scales(w, r, row.data(), s, scales);
  for (int64_t c = 0; c < cols; ++c) {
    const float q = std::nearbyint(row[static_cast<size_t>(c)] / scales[c / per]);  // half to even
    codes[c] = static_cast<int8_t>(std::clamp(q, static_cast<float>(qmin), static_cast<float>(qmax)));
  }
}

QuantizedMatrix quantize_matrix(const WeightMatrix& dense, const QuantScheme& scheme, const std::string& name,
                                const std::string& file) {
  if (dense.quantized() || !is_float(dense.dtype) || dense.row_stride() != dense.cols)
    fail(file, ": '", name, "' is not a dense contiguous F32/BF16/F16 matrix (", dtype_name(dense.dtype),
         "): it cannot be quantized again");
  if (scheme.format == WeightFormat::Int4Group && (scheme.group <= 0 || dense.cols % scheme.group != 0))
    fail(file, ": '", name, "' has input width ", dense.cols, ", not a multiple of the int4 group ", scheme.group,
         ": use int8, or a group that divides it");
  const TensorView view{name,
                        dense.dtype,
                        {dense.rows, dense.cols},
                        static_cast<const std::byte*>(dense.data),
                        static_cast<size_t>(dense.rows * dense.cols) * dtype_size(dense.dtype),
                        file};
  QuantizedMatrix q;
  const bool int8 = scheme.format == WeightFormat::Int8Channel;
  q.codes.resize(static_cast<size_t>(int8 ? dense.rows * dense.cols : dense.rows * dense.cols / 2));
  q.scales.resize(static_cast<size_t>(dense.rows * scheme.groups_per_row(dense.cols)) * dtype_size(dense.dtype));
  quantize_all_rows(view, scheme, q.scales.data(), nullptr);
  quantize_all_rows(view, scheme, nullptr, q.codes.data());
  WeightMatrix& w = q.matrix;
  w.data = q.codes.data();
  w.dtype = int8 ? DType::I8 : DType::I32;
  w.rows = dense.rows;
  w.cols = dense.cols;
  w.format = scheme.format;
  w.scales = q.scales.data();
  w.scale_dtype = dense.dtype;
  w.group = int8 ? 0 : scheme.group;
  return q;
}

QuantizeSummary quantize_checkpoint(const QuantizeRequest& q) {
  const QuantScheme& s = q.scheme;
  if (s.format != WeightFormat::Int8Channel && s.format != WeightFormat::Int4Group)
    fail("quantize: the target format must be int8 per channel or int4 group");
  if (s.format == WeightFormat::Int4Group && (s.group <= 0 || s.group % kActivationBlock != 0))
    fail("--group ", s.group, ": must be a positive multiple of ", kActivationBlock);
  check_output_folder(q);

  const std::string config_file = (fs::path(q.in_dir) / "config.json").string();
  read_json_file(config_file);  // a missing file or bad JSON: its error
  ojson config = ojson::parse(read_file(config_file));
  if (config.contains("quantization_config") && !config["quantization_config"].is_null())
    fail(config_file, ": quantization_config is present (",
         config["quantization_config"].is_object()
             ? config["quantization_config"].value("quant_method", std::string("?"))
             : std::string("?"),
         "): the checkpoint is already quantized; eaglet quantize reads dense F32, BF16 or F16 weights");
  const QuantizeRequest::Layout layout = q.layout ? *q.layout : target_layout(q.in_dir);
  const Checkpoint ckpt = Checkpoint::open_dir(q.in_dir);
  const TensorList& list = layout.tensors;

  std::set<std::string> linears;
  const std::string head_name = layout.tensor_prefix + "lm_head.weight";
  for (const TensorSpec& t : list) {
    if (t.kind != TensorKind::Linear || (t.name == head_name && !q.lm_head)) continue;
    const std::string module = t.name.substr(0, t.name.size() - std::string(".weight").size());
    if (const TensorView* packed = ckpt.find(module + ".weight_packed"))
      fail(packed->file, ": holds '", packed->name,
           "': the checkpoint is already quantized; eaglet quantize reads "
           "dense F32, BF16 or F16 weights");
    const TensorView* w = ckpt.find(t.name);
    if (w != nullptr && !is_float(w->dtype))
      fail(w->file, ": '", w->name, "' is stored as ", dtype_name(w->dtype),
           ": the checkpoint is already quantized; "
           "eaglet quantize reads dense F32, BF16 or F16 weights");
    if (w != nullptr && s.format == WeightFormat::Int4Group && t.shape.at(1) % s.group != 0)
      fail(w->file, ": '", w->name, "' has input width ", t.shape.at(1), ", which --group ", s.group,
           " does not divide (each row is cut into groups of that many columns); choose a --group (a multiple of ",
           kActivationBlock, ") that divides every projection's input width");
    linears.insert(t.name);
  }
  // Strict accounting, as loading does: what is written is exactly what the architecture reads.
  load_tensors(ckpt, list, layout.description);

  QuantizeSummary summary;
  std::optional<TensorView> tied_head;                      // outlives the writers' callbacks, which capture it
  std::map<std::string, std::vector<TensorToWrite>> files;  // by file name, as the input shards them
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, view] : ckpt.all()) {
    const std::string file = fs::path(view->file).filename().string();
    std::vector<TensorToWrite>& out = files[file];
    summary.bytes_before += view->nbytes;
    std::vector<TensorToWrite> written = {{name, view->dtype, view->shape, view->data}};
    if (linears.count(name)) {
      written = quantized_tensors(*view, s);
      summary.linear_bytes_before += view->nbytes;
      for (const TensorToWrite& t : written) summary.linear_bytes_after += bytes_of(t);
      ++summary.quantized;
    } else {
      ++summary.copied;
    }
    if (q.lm_head && layout.tie_word_embeddings && name == layout.tensor_prefix + "model.embed_tokens.weight" &&
        ckpt.find(head_name) == nullptr) {  // the tied head, untied: the embedding stays for the lookup
      TensorView head = *view;
      head.name = head_name;
      tied_head = head;
      for (const TensorToWrite& t : quantized_tensors(*tied_head, s)) written.push_back(t);
      ++summary.quantized;
    }
    for (TensorToWrite& t : written) {
      summary.bytes_after += bytes_of(t);
      weight_map[t.name] = file;
      out.push_back(std::move(t));
    }
  }
  const bool sharded = fs::path(ckpt.source()).filename() == "model.safetensors.index.json";
  std::set<std::string> names;
  for (const auto& [file, tensors] : files) names.insert(file);
  if (sharded) names.insert("model.safetensors.index.json");
  if (q.force) check_no_stale_weights(q.out_dir, names);

  create_output_dir(q.out_dir);  // every file below is written whole or not at all (io/files.h)
  for (const auto& [file, tensors] : files) {
    write_safetensors((fs::path(q.out_dir) / file).string(), tensors, {{"format", "pt"}});
    summary.weight_files.push_back(file);
  }
  if (sharded) {
    ojson index = ojson::parse(read_file(ckpt.source()));
    if (!index.contains("metadata") || !index["metadata"].is_object()) index["metadata"] = ojson::object();
    index["metadata"]["total_size"] = summary.bytes_after;
    index["weight_map"] = weight_map;
    write_file_atomic((fs::path(q.out_dir) / "model.safetensors.index.json").string(), index.dump(2) + "\n");
  }
  for (const auto& e : fs::directory_iterator(q.in_dir)) {
    const std::string name = e.path().filename().string();
    if (name == "config.json" || names.count(name)) continue;
    std::error_code ec;  // a symlink loop or a FIFO in the folder is skipped like any other non-file
    if (!e.is_regular_file(ec) || is_weight_file(e.path())) {
      summary.files_skipped.push_back(name);
      continue;
    }
    write_file_atomic((fs::path(q.out_dir) / name).string(), read_file(e.path().string()));
    summary.files_copied.push_back(name);
  }
  // Last: a folder whose writing was interrupted has no config.json to load it by.
  config["quantization_config"] = quantization_config(s, layout.tensor_prefix, q.lm_head);
  if (q.lm_head && layout.tie_word_embeddings)
    (layout.tensor_prefix.empty() ? config : config["text_config"])["tie_word_embeddings"] = false;
  write_file_atomic((fs::path(q.out_dir) / "config.json").string(), config.dump(2) + "\n");
  return summary;
}

}  // namespace eaglet
