// eaglet convert-draft: an EAGLE-3 drafter of any layout, written in the layout SGLang or vLLM loads.
#include <cstdio>

#include "cli/commands.h"
#include "drafter/eagle3_export.h"
#include "model/transformer.h"

namespace eaglet::cli {

namespace {

struct ConvertArgs {
  std::string model, drafter, format, out, aux_convention;
};

int run_convert(const ConvertArgs& a) {
  auto target = Transformer::load(a.model);
  auto drafter = Eagle3Drafter::load(a.drafter, *target, {.aux_convention = aux_convention_flag(a.aux_convention)});
  export_drafter(*drafter, *target, parse_drafter_format(a.format), a.out);
  std::fprintf(stderr, "%s\nwrote %s (%s layout)\n", drafter->describe().c_str(), a.out.c_str(), a.format.c_str());
  return 0;
}

}  // namespace

Command add_convert_draft(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert-draft", "Write an EAGLE-3 drafter in the layout SGLang or vLLM loads");
  auto a = std::make_shared<ConvertArgs>();
  cmd->add_option("-m,--model", a->model, "The target model the drafter serves")->required();
  cmd->add_option("-d,--draft-model", a->drafter, "EAGLE-3 drafter folder (any layout)")->required();
  cmd->add_option("--format", a->format, "sglang (midlayer.*, LlamaForCausalLMEagle3) or speculators (vLLM)")
      ->required()
      ->check(CLI::IsMember({"sglang", "speculators"}));
  cmd->add_option("--out", a->out, "Output folder")->required();
  cmd->add_option("--aux-layer-convention", a->aux_convention, "How the source's explicit aux ids are read (see generate)")
      ->check(CLI::IsMember({"input", "output"}));
  return [a] { return run_convert(*a); };
}

}  // namespace eaglet::cli
