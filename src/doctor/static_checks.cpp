// The load contracts, run one by one: the loader's own checks (drafter/), each caught and reported on its line.
#include "doctor/static_checks.h"

#include "drafter/eagle3_drafter.h"
#include "drafter/vocab_map.h"
#include "model/tensor_list.h"
#include "model/transformer.h"
#include "util/error.h"

namespace eaglet::doctor {

namespace {

const char* fix_for(const std::string& contract) {
  if (contract == "target vocabulary" || contract == "target hidden size")
    return "use the drafter trained for this target (its config names the target it was trained on)";
  if (contract == "fc")
    return "fc must fuse every aux layer (aux layers x target hidden wide): re-export the drafter with its fc.weight, "
           "or fix eagle_aux_hidden_state_layer_ids to the layers it was trained on";
  if (contract == "attention input")
    return "the EAGLE-3 layer attends over [embedding, hidden] (2 x hidden): this is no EAGLE-3 checkpoint, or a "
           "converter rebuilt q/k/v for hidden";
  if (contract == "lm_head") return "draft_vocab_size must equal the rows of lm_head.weight and the length of d2t";
  if (contract == "embedding") return "ship an embedding of [target vocab, drafter hidden], or none (the target's)";
  return "";
}

}  // namespace

bool check_load_contracts(const std::string& dir, const Transformer& target, const DrafterOptions& options, Report& r) {
  DrafterConfig config;
  if (!r.contract(
          "config", [&] { config = DrafterConfig::load(dir); }, "config.json reads as an EAGLE-3 drafter",
          "fix the named key of config.json"))
    return false;
  r.checks.back().reason = std::string("config.json reads as ") + layout_name(config.layout) + ", " +
                           std::to_string(config.num_layers) + " layer(s), hidden " +
                           std::to_string(config.hidden_size) + ", draft vocab " +
                           std::to_string(config.draft_vocab_size);
  Checkpoint checkpoint;
  if (!r.contract(
          "safetensors", [&] { checkpoint = Checkpoint::open_dir(dir); }, "the checkpoint's headers are valid",
          "re-save the drafter's weights with safetensors"))
    return false;
  const int64_t L = target.config().num_layers;
  std::vector<int> aux = config.aux_layer_ids.empty() ? target.default_aux_layers() : config.aux_layer_ids;
  bool ok = r.contract(
      "aux layers", [&] { aux = resolve_aux_layers(config, L, options.aux_convention); },
      "hidden states " + ids_str(config.aux_layer_ids.empty() ? target.default_aux_layers() : aux) +
          " exist in the target",
      "eagle_aux_hidden_state_layer_ids must name layers of this target (0.." + std::to_string(L) +
          "): is the drafter for another target, or its ids in the other convention (--aux-layer-convention)?");
  if (ok) r.checks.back().reason = "captures hidden states " + ids_str(aux) + " of the target's " + std::to_string(L);
  std::string layer0 = "midlayer.";
  if (r.contract(
          "layer names", [&] { layer0 = eagle3_layer0_prefix(checkpoint); }, "",
          "keep one copy of the decoder layer, named as the layout expects")) {
    if (config.layout == DrafterLayout::Eagle && layer0 == "layers.0.")
      r.checks.back() = {"layer names", Verdict::Warn,
                         "the decoder layer is saved as layers.0.* in an EAGLE/SpecForge-layout config, which names it "
                         "midlayer.*: eaglet and current SGLang/vLLM load either, but older SGLang skipped unmatched "
                         "names silently and ran a random layer (accept len 1.00)",
                         "eaglet convert-draft --format sglang (midlayer.*) or --format speculators (layers.0.*)"};
    else
      r.checks.back().reason =
          "decoder layer " + layer0 + "* as the " + layout_name(config.layout) + " layout names it";
  } else {
    ok = false;
  }
  const DrafterContractInput in{config, checkpoint, target.config(), aux, layer0};
  for (const DrafterContract& c : eagle3_contracts())
    if (!r.contract(
            c.name, [&] { c.check(in); }, "holds", fix_for(c.name)))
      ok = false;
  ok = r.contract(
           "tensors",
           [&] {
             load_tensors(
                 checkpoint,
                 eagle3_tensors(config, layer0, static_cast<int64_t>(aux.size()), target.config().vocab_size, L),
                 "EAGLE-3 drafter");
           },
           "every tensor consumed with its expected shape and dtype",
           "a tensor nobody reads is a weight silently dropped: rename it as the layout expects, or remove it") &&
       ok;
  std::string vocab;
  if (r.contract(
          "d2t/t2d",
          [&] {
            const VocabMap map =
                VocabMap::build(checkpoint.find("d2t"), checkpoint.find("t2d"), config.draft_vocab_size,
                                target.config().vocab_size, checkpoint.source());
            vocab = map.identity() ? "identity (draft vocabulary = target vocabulary)"
                                   : "offsets map " + std::to_string(config.draft_vocab_size) +
                                         " draft ids into the target vocabulary, consistent with t2d";
          },
          "", "d2t must hold offsets (target = draft + d2t[draft]) for every lm_head row, t2d mark exactly those ids"))
    r.checks.back().reason = vocab;
  else
    ok = false;
  return ok;
}

}  // namespace eaglet::doctor
