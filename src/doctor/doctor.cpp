#include "doctor/doctor.h"

#include <functional>

#include "doctor/live_checks.h"
#include "doctor/static_checks.h"
#include "doctor/training_record.h"
#include "model/transformer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace eaglet::doctor {

const std::vector<std::string>& builtin_prompts() {
  static const std::vector<std::string> prompts = {
      "Explain in a few sentences why the sky is blue.",
      "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
      "Write a short list of tips for staying focused while working from home:\n1.",
      "The history of the printing press begins",
  };
  return prompts;
}

namespace {

// A group of checks that reads files a contract above may already have found broken: an Error it meets becomes a
// FAIL line of its own instead of ending the report.
void guarded(Report& r, const std::string& name, const std::function<void()>& checks) {
  try {
    checks();
  } catch (const Error& e) {
    r.fail(name, e.what(), "fix the file named");
  }
}

}  // namespace

Report run_doctor(const DoctorOptions& o) {
  Report r;
  auto target = Transformer::load(o.target_dir, o.target_load);
  Tokenizer tokenizer = Tokenizer::load(o.target_dir);
  check_tokenizer_fits(tokenizer, target->config().vocab_size, target->config().file);

  const bool loads = check_load_contracts(o.spec.drafter, *target, o.spec.load, r);
  DrafterConfig config;
  bool have_config = true;
  try {
    config = DrafterConfig::load(o.spec.drafter);
  } catch (const Error&) {
    have_config = false;  // reported by the "config" check
  }
  if (have_config)
    guarded(r, "conventions", [&] { check_conventions(config, *target, o.spec.load.aux_convention, r); });
  if (loads) guarded(r, "provenance", [&] { check_provenance(o.spec.drafter, *target, r); });
  guarded(r, "tokenizer files", [&] { check_tokenizer_files(o.spec.drafter, o.target_dir, o.chat_template_file, r); });
  std::optional<TrainingRecord> record;
  try {
    record = read_training_record(o.spec.drafter);
    check_training_record(record, o.target_dir, r);
  } catch (const Error& e) {
    r.fail("training record", e.what(), "fix or remove the file (eaglet's trainer writes it)");
    record.reset();
  }
  if (!loads) {
    r.warn("live checks", "not run: the drafter does not load (FAIL lines above)", "fix those first");
    return r;
  }
  LiveInput live{o.spec, {}, o.max_tokens, record};
  // Like with like: without --prompts, a record that names its prompts is compared on them (and its max_tokens).
  if (record && !record->report_prompts.empty() && o.prompts.empty() && !o.chat &&
      record->vocab_size == target->config().vocab_size) {
    live.prompts = record->report_prompts;
    live.max_tokens = record->report_max_tokens;
    live.record_prompts = true;
    r.measured["prompts"] = live.prompts.size();
    r.measured["prompts_from"] = record->file;
    r.pass("prompts", std::to_string(live.prompts.size()) + " prompts recorded in " + record->file + " (" +
                          std::to_string(live.max_tokens) +
                          " tokens each): the record's figures compare like with "
                          "like");
    guarded(r, "live checks", [&] { run_live_checks(*target, live, r); });
    return r;
  }
  const std::vector<std::string>& texts = o.prompts.empty() ? builtin_prompts() : o.prompts;
  std::optional<ChatTemplate> chat;
  if (o.chat) {
    chat = ChatTemplate::load(o.target_dir, o.chat_template_file);
    chat->check_markers(tokenizer, o.target_dir);
  }
  for (const std::string& text : texts)
    live.prompts.push_back(chat ? tokenizer.encode(chat->render(user_conversation(text), true), false)
                                : tokenizer.encode(text, tokenizer.adds_bos()));
  r.measured["prompts"] = live.prompts.size();
  guarded(r, "live checks", [&] { run_live_checks(*target, live, r); });
  return r;
}

}  // namespace eaglet::doctor
