// eaglet hidden: the aux hidden states (and logits) of a prompt, written to a safetensors file.
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "io/json_util.h"
#include "io/safetensors.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {

struct HiddenArgs {
  std::string model;
  LoadOptions load;
  std::string layers, out;
  TextInput input;
  int threads = 0;
};

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(v[i]);
  }
  return s;
}

int run_hidden(const HiddenArgs& a) {
  set_num_threads(a.threads);
  refuse_to_overwrite_model(a.out, a.model);
  Tokenizer tokenizer = Tokenizer::load(a.model);
  auto model = Transformer::load(a.model, a.load);
  check_tokenizer_fits(tokenizer, model->config().vocab_size, model->config().file);
  model->set_aux_layers(a.layers.empty() ? usable_default_aux_layers(model->config().num_layers,
                                                                     [](const std::vector<int>& ids) {
                                                                       return "pass --layers " + format_int_list(ids);
                                                                     })
                                         : parse_int_list(a.layers, "--layers"));
  const auto tokens = tokenizer.encode(a.input.read("hidden"), tokenizer.adds_bos());
  if (tokens.empty()) fail("hidden: the prompt is empty after tokenization");
  KVCache cache = model->make_cache(static_cast<int64_t>(tokens.size()));
  model->forward(cache, {.tokens = tokens, .all_logits = true});
  const int64_t S = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> ids(tokens.begin(), tokens.end());
  const auto& layers = model->aux_layers();
  write_safetensors(
      a.out,
      {{"input_ids", DType::I64, {S}, ids.data()},
       {"hidden_states", DType::F32, {S, model->aux_width()}, model->aux_hidden().data()},
       {"logits", DType::F32, {S, model->config().vocab_size}, model->logits().data()}},
      {{"aux_layers", join(layers)},
       {"aux_layer_convention", "input: hidden_states[i] is the residual stream entering layer i (HF hidden_states)"},
       {"model", a.model}});
  std::fprintf(stderr, "wrote %s: %lld tokens, layers [%s] (input of layer i), hidden_states [%lld, %lld]\n",
               a.out.c_str(), static_cast<long long>(S), join(layers).c_str(), static_cast<long long>(S),
               static_cast<long long>(model->aux_width()));
  return 0;
}

}  // namespace

Command add_hidden(CLI::App& app) {
  auto* cmd = app.add_subcommand("hidden", "Write a prompt's aux hidden states and logits to a safetensors file");
  auto a = std::make_shared<HiddenArgs>();
  add_model_args(*cmd, a->model, a->load);
  a->input.add_to(*cmd, "Prompt text");
  cmd->add_option("--layers", a->layers,
                  "Layer ids, HF hidden_states meaning: i = input of layer i, L = final pre-norm output "
                  "(default 2,L/2,L-3)");
  cmd->add_option("--out", a->out, "Output .safetensors file")->required();
  add_threads_option(*cmd, a->threads);
  return [a] { return run_hidden(*a); };
}

}  // namespace eaglet::cli
