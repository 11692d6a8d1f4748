// eaglet doctor -m TARGET -d DRAFTER: why acceptance is low, one PASS / WARN / FAIL line per check (stdout);
// exit 1 when a check fails.
#include <iostream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "doctor/doctor.h"
#include "doctor/report.h"
#include "io/prompts_file.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {

struct DoctorArgs {
  doctor::DoctorOptions options;
  int threads = 0;
  std::string prompts_file;
  bool json = false;
};

int run_doctor(DoctorArgs& a) {
  set_num_threads(a.threads);
  if (!a.prompts_file.empty()) a.options.prompts = read_prompts_file(a.prompts_file);
  const doctor::Report report = doctor::run_doctor(a.options);
  if (a.json)
    std::cout << doctor::report_json(report).dump(2) << "\n";
  else
    std::cout << doctor::report_table(report);
  return report.failed() ? 1 : 0;
}

}  // namespace

Command add_doctor(CLI::App& app) {
  auto* cmd = app.add_subcommand("doctor", "Check a drafter against its target and say why acceptance is low");
  auto a = std::make_shared<DoctorArgs>();
  add_model_args(*cmd, a->options.target_dir, a->options.target_load);
  add_drafter_args(*cmd, a->options.spec, "-d,--draft-model");
  cmd->get_option("--draft-model")->required();
  cmd->add_option("--prompts", a->prompts_file,
                  "Prompts: one per line, or JSON lines with a 'prompt' field "
                  "(default: a few built-in generic prompts)");
  cmd->add_flag("--chat", a->options.chat, "Render each prompt as a user turn with the target's chat template");
  add_chat_template_args(*cmd, a->options.chat_template_file);
  cmd->add_option("-n,--n-predict", a->options.max_tokens, "Tokens generated per prompt and setting")
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--json", a->json, "Print the report as JSON");
  add_threads_option(*cmd, a->threads);
  return [a] { return run_doctor(*a); };
}

}  // namespace eaglet::cli
