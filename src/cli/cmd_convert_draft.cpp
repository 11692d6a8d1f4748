// eaglet convert-draft: an EAGLE-3 drafter of any layout, written in the layout SGLang or vLLM loads.
#include "cli/args.h"
#include "cli/commands.h"
#include "drafter/eagle3_export.h"
#include "model/transformer.h"
#include "util/log.h"

namespace eaglet::cli {

namespace {

struct ConvertArgs {
  std::string model;
  LoadOptions load;
  std::string format, out;
  SpecOptions spec;
};

int run_convert(const ConvertArgs& a) {
  auto target = Transformer::load(a.model, a.load);
  auto drafter = Speculation::load_drafter(a.spec.drafter, a.spec.load, *target);
  export_drafter(*drafter, *target, parse_drafter_format(a.format), a.out);
  log_info(drafter->describe() + "\nwrote " + a.out + " (" + a.format + " layout)");
  return 0;
}

}  // namespace

Command add_convert_draft(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert-draft", "Write an EAGLE-3 drafter in the layout SGLang or vLLM loads");
  auto a = std::make_shared<ConvertArgs>();
  add_model_args(*cmd, a->model, a->load);
  add_drafter_args(*cmd, a->spec, "-d,--draft-model");
  cmd->get_option("--draft-model")->required();
  cmd->add_option("--format", a->format, "sglang (midlayer.*, LlamaForCausalLMEagle3) or speculators (vLLM)")
      ->required()
      ->check(CLI::IsMember({"sglang", "speculators"}));
  cmd->add_option("--out", a->out, "Output folder")->required();
  return [a] { return run_convert(*a); };
}

}  // namespace eaglet::cli
