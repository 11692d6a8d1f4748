#include "drafter/eagle3_export.h"

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/files.h"
#include "io/json_util.h"
#include "io/safetensors.h"
#include "model/transformer.h"
#include "util/error.h"

namespace eaglet {

namespace {

using json = nlohmann::json;

json rope_scaling(const RopeConfig& r) {
  switch (r.type) {
    case RopeType::Default: return nullptr;
    case RopeType::Linear: return {{"rope_type", "linear"}, {"factor", r.factor}};
    case RopeType::Llama3:
      return {{"rope_type", "llama3"},
              {"factor", r.factor},
              {"low_freq_factor", r.low_freq_factor},
              {"high_freq_factor", r.high_freq_factor},
              {"original_max_position_embeddings", r.original_max_position}};
    case RopeType::Yarn: fail("internal: a drafter's rope is never yarn (its config reader refuses it)");
  }
  return nullptr;
}

// The decoder layer's LlamaConfig fields, rope included, as every layout writes them.
json layer_fields(const DrafterConfig& c, const ModelConfig& t) {
  return {{"model_type", "llama"},
          {"hidden_size", c.hidden_size},
          {"intermediate_size", c.intermediate_size},
          {"num_hidden_layers", c.num_layers},
          {"num_attention_heads", c.num_heads},
          {"num_key_value_heads", c.num_kv_heads},
          {"head_dim", c.head_dim},
          {"hidden_act", "silu"},
          {"rms_norm_eps", c.rms_norm_eps},
          {"rope_theta", c.rope.theta},
          {"rope_scaling", rope_scaling(c.rope)},
          {"max_position_embeddings", t.max_position_embeddings},
          {"vocab_size", c.vocab_size},
          {"tie_word_embeddings", false},
          {"attention_bias", false},
          {"mlp_bias", false}};
}

const char* dtype_word(DType d) { return d == DType::BF16 ? "bfloat16" : d == DType::F16 ? "float16" : "float32"; }

}  // namespace

json sglang_drafter_config(const DrafterConfig& c, const std::vector<int>& aux_layers, const ModelConfig& t,
                           DType dtype) {
  const auto refuse = [&](const char* what) {
    fail(c.file, ": ", what,
         ": SGLang's LlamaForCausalLMEagle3 would compute this drafter differently; export it "
         "with --format speculators (vLLM)");
  };
  if (c.norm_before_residual) refuse("norm_before_residual is true (SGLang adds the un-normed hidden state)");
  if (c.norm_output) refuse("norm_output is true (SGLang feeds the un-normed state to the next step)");
  if (c.norm_before_fc) refuse("norm_before_fc is true (input_norm before fc)");
  if (c.num_layers != 1) refuse("it has more than one decoder layer");
  std::vector<int> ids;
  for (int id : aux_layers) {
    if (id == 0) refuse("aux layer 0 (the embeddings) has no output-of-layer id");
    ids.push_back(id - 1);  // SGLang adds 1: id i means the output of layer i
  }
  json j = layer_fields(c, t);
  j["architectures"] = {"LlamaForCausalLMEagle3"};
  j["draft_vocab_size"] = c.draft_vocab_size;
  j["target_hidden_size"] = c.target_hidden_size;
  j["fc_norm"] = c.fc_norm;
  j["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", ids}, {"use_aux_hidden_state", true}};
  j["torch_dtype"] = dtype_word(dtype);
  return j;
}

namespace {

// As the target's config.json names them (speculators records its verifier so).
json verifier_architectures(const ModelConfig& t) {
  const json j = read_json_file(t.file);
  if (!j.contains("architectures") || !j["architectures"].is_array())
    fail(t.file, ": no 'architectures' list to record as the drafter's verifier");
  return j["architectures"];
}

json speculators_config(const Eagle3Drafter& d, const ModelConfig& t, DType dtype) {
  const DrafterConfig& c = d.config();
  json layer = layer_fields(c, t);
  layer["architectures"] = {"LlamaForCausalLM"};
  layer["torch_dtype"] = dtype_word(dtype);
  return {
      {"architectures", {"Eagle3Speculator"}},
      {"speculators_model_type", "eagle3"},
      {"speculators_config",
       {{"algorithm", "eagle3"},
        {"proposal_methods",
         {{{"proposal_type", "greedy"}, {"speculative_tokens", c.speculative_tokens > 0 ? c.speculative_tokens : 3}}}},
        {"default_proposal_method", "greedy"},
        {"verifier", {{"name_or_path", t.dir}, {"architectures", verifier_architectures(t)}}}}},
      {"transformer_layer_config", layer},
      {"draft_vocab_size", c.draft_vocab_size},
      {"target_hidden_size", c.target_hidden_size},
      {"eagle_aux_hidden_state_layer_ids", d.aux_layers()},
      {"norm_before_residual", c.norm_before_residual},
      {"norm_before_fc", c.norm_before_fc},
      {"fc_norm", c.fc_norm},
      {"norm_output", c.norm_output},
      {"embed_requires_grad", false},
      {"torch_dtype", dtype_word(dtype)}};
}

}  // namespace

DrafterFormat parse_drafter_format(const std::string& name) {
  if (name == "sglang") return DrafterFormat::Sglang;
  if (name == "speculators") return DrafterFormat::Speculators;
  fail("--format: '", name, "' is not a drafter format (expected sglang or speculators)");
}

void export_drafter(const Eagle3Drafter& d, const Transformer& target, DrafterFormat format,
                    const std::string& out_dir) {
  namespace fs = std::filesystem;
  const DrafterConfig& c = d.config();
  const ModelConfig& t = target.config();
  const Checkpoint& src = d.checkpoint();
  const std::string layer0 = format == DrafterFormat::Sglang ? "midlayer." : "layers.0.";
  const int64_t n_aux = static_cast<int64_t>(d.aux_layers().size());
  if (c.quant.format != WeightFormat::Dense)
    fail(c.dir, ": the drafter is stored quantized (", c.quant.description,
         "); convert-draft writes dense drafters: convert the dense one, then run eaglet quantize on the output");
  if (d.quantized_at_load())
    fail(c.dir, ": the drafter was quantized at load (--speculative-draft-model-quantization); convert-draft writes ",
         "dense drafters: drop the flag, then run eaglet quantize on the output");
  const TensorView& fc = *src.find("fc.weight");
  if (path_exists(out_dir) && !is_directory_path(out_dir)) fail(out_dir, ": exists and is not a folder");
  // Writing over the files being read (memory-mapped) would destroy the source midway.
  for (const std::string& source : {c.dir, t.dir})
    if (path_exists(out_dir) && fs::equivalent(out_dir, source))
      fail(out_dir, ": is the folder of the ", source == c.dir ? "drafter" : "target",
           " being read; write the converted drafter to another folder (--out)");

  std::vector<TensorToWrite> out;
  // Every weight on the source's list, renamed to the destination's layer prefix, bytes and dtype unchanged.
  for (const TensorSpec& spec : eagle3_tensors(c, d.layer0_prefix(), n_aux, t.vocab_size)) {
    if (spec.kind == TensorKind::Index || spec.use == TensorUse::Unused) continue;
    const TensorView* v = src.find(spec.name);
    if (v == nullptr) continue;
    std::string name = spec.name;
    if (name.rfind(d.layer0_prefix(), 0) == 0) name = layer0 + name.substr(d.layer0_prefix().size());
    if (name == "embed_tokens.weight" && format == DrafterFormat::Sglang) {
      const TensorView& te = target.embed_tokens();
      if (v->dtype != te.dtype || v->nbytes != te.nbytes || std::memcmp(v->data, te.data, v->nbytes) != 0)
        fail(src.source(),
             ": embed_tokens.weight differs from the target's embedding, and SGLang replaces a drafter's "
             "embedding with the target's; export it with --format speculators (vLLM)");
      continue;  // the target's own: SGLang and vLLM share it
    }
    out.push_back({name, v->dtype, v->shape, v->data});
  }
  std::vector<float> head_f32;
  if (src.find("lm_head.weight") == nullptr) {  // the target's head served: write it, an engine may not share it
    const WeightMatrix& head = target.lm_head();
    if (!head.quantized() && head.row_stride() == head.cols) {
      out.push_back({"lm_head.weight", head.dtype, {head.rows, head.cols}, head.data});
    } else {  // what the quantized head means, in fp32: a drafter's head is dense in every layout
      head_f32.resize(static_cast<size_t>(head.rows * head.cols));
      for (int64_t r = 0; r < head.rows; ++r) dequantize_row(head, r, &head_f32[static_cast<size_t>(r * head.cols)]);
      out.push_back({"lm_head.weight", DType::F32, {head.rows, head.cols}, head_f32.data()});
    }
  }
  std::vector<int64_t> d2t(static_cast<size_t>(c.draft_vocab_size));
  std::vector<uint8_t> t2d(static_cast<size_t>(t.vocab_size), 0);
  for (int32_t i = 0; i < static_cast<int32_t>(d2t.size()); ++i) {
    const int32_t id = d.vocab().to_target(i);
    d2t[static_cast<size_t>(i)] = id - i;
    t2d[static_cast<size_t>(id)] = 1;
  }
  out.push_back({"d2t", DType::I64, {c.draft_vocab_size}, d2t.data()});
  out.push_back({"t2d", DType::BOOL, {t.vocab_size}, t2d.data()});

  const json config = format == DrafterFormat::Sglang ? sglang_drafter_config(c, d.aux_layers(), t, fc.dtype)
                                                      : speculators_config(d, t, fc.dtype);
  create_output_dir(out_dir);
  write_safetensors((fs::path(out_dir) / "model.safetensors").string(), out,
                    {{"format", "pt"}, {"eaglet_source", src.source()}});  // written whole or not at all
  write_file_atomic((fs::path(out_dir) / "config.json").string(), config.dump(2) + "\n");
}

}  // namespace eaglet
