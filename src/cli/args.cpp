#include "cli/args.h"

#include "cli/common.h"
#include "util/log.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {
const char* const kSpecGroup = "Speculative decoding";
const char* const kDrafterOption = "--speculative-draft-model-path";  // the drafter's path: not passed on
}  // namespace

void add_model_args(CLI::App& cmd, std::string& dir, LoadOptions& load, const std::string& names) {
  cmd.add_option(names, dir, "Hugging Face model folder (config.json, tokenizer.json, *.safetensors)")->required();
  cmd.add_flag("--allow-unused-tensors", load.allow_unused_tensors,
               "Load even if the checkpoint holds tensors the model does not use (each listed)");
  cmd.add_option_function<std::string>(
         "--kv-cache-dtype",
         [&load](const std::string& name) {
           if (name == "auto")
             load.kv_dtype.reset();
           else if (name == "bf16" || name == "bfloat16")
             load.kv_dtype = DType::BF16;
           else if (name == "fp32" || name == "float32")
             load.kv_dtype = DType::F32;
         },
         "Element type of the KV cache (target and drafter): auto (bf16 for a bf16 model, else fp32), bf16 or fp32")
      ->check(CLI::IsMember({"auto", "bf16", "bfloat16", "fp32", "float32"}));
}

std::string describe_model(const std::string& dir, const LoadOptions& load) {
  std::string s = dir + (load.allow_unused_tensors ? " (unused tensors allowed)" : "");
  if (load.kv_dtype) s += std::string(", KV cache ") + kv_dtype_name(*load.kv_dtype);
  return s;
}

std::string describe_threads() { return std::to_string(thread_pool().size()) + " threads"; }

void add_context_args(CLI::App& cmd, int64_t& context, int& batch, const std::string& context_help) {
  cmd.add_option("-c,--ctx", context, context_help)->check(at_least(0));
  cmd.add_option("-b,--batch", batch, "Prompt tokens per prefill forward")->check(at_least(1));
}

std::string describe_context(int64_t context, int batch) {
  return (context > 0 ? std::to_string(context) + " tokens" : std::string("default")) + ", prefill batch " +
         std::to_string(batch);
}

void add_chat_template_args(CLI::App& cmd, std::string& template_file) {
  cmd.add_option("--chat-template-file", template_file,
                 "Jinja chat template to render chats with instead of the model's (chat_template.jinja or "
                 "tokenizer_config.json)");
}

void add_sampling_args(CLI::App& cmd, SamplingParams& s, const std::string& p) {
  cmd.add_option("--temp", s.temperature, p + "Temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0));
  cmd.add_option("--top-p", s.top_p, p + "Nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--top-k", s.top_k, p + "Keep only the k most likely tokens (0 = all)")->check(at_least(0));
  cmd.add_option("--seed", s.seed, p + "Random seed for sampling")->check(at_least(0));
}

void add_drafter_args(CLI::App& cmd, SpecOptions& o, const std::string& drafter_names) {
  cmd.add_option(drafter_names, o.drafter, "EAGLE-3 drafter folder (any layout)")->group(kSpecGroup);
  cmd.add_option_function<std::string>(
         "--aux-layer-convention", [&o](const std::string& text) { o.load.aux_convention = aux_convention_flag(text); },
         "Meaning of explicit eagle_aux_hidden_state_layer_ids: input (of layer i: vLLM, speculators) or output (of "
         "layer i: SGLang, SpecForge). Default: by drafter layout")
      ->check(CLI::IsMember({"input", "output"}))
      ->group(kSpecGroup);
  cmd.add_option_function<std::string>(
         "--speculative-draft-model-quantization",
         [&o](const std::string& text) {
           if (text == "none")
             o.load.quantize.reset();
           else
             o.load.quantize = QuantScheme{text == "int4" ? WeightFormat::Int4Group : WeightFormat::Int8Channel, 32};
         },
         "Quantize a dense drafter's fc and projections at load, as eaglet quantize writes them: int8 (per channel), "
         "int4 (groups of 32) or none (default). The target is untouched: output stays the same")
      ->check(CLI::IsMember({"none", "int8", "int4"}))
      ->group(kSpecGroup);
}

void add_round_args(CLI::App& cmd, SpecOptions& o, RoundFlags which) {
  DraftParams& d = o.round.draft;
  cmd.add_option("--speculative-algorithm", o.algorithm, "none or eagle3 (default: eagle3 when -d is given)")
      ->check(CLI::IsMember({"none", "eagle3", "EAGLE3"}))
      ->group(kSpecGroup);
  o.round.policy = SpecPolicy::Auto;
  cmd.add_option_function<std::string>(
         "--speculative-policy",
         [&o](const std::string& s) { o.round.policy = s == "static" ? SpecPolicy::Static : SpecPolicy::Auto; },
         "auto (default): each round's tree, or none, from this machine's measured costs and the live acceptance, "
         "within the shape flags when given; static: every round the shape the flags give (SGLang's behaviour)")
      ->check(CLI::IsMember({"auto", "static"}))
      ->group(kSpecGroup);
  const auto given = [&o](const std::string&) { o.draft_given = true; };
  cmd.add_option("--speculative-num-steps", d.num_steps, "Draft depth (auto: the most it drafts)")
      ->check(CLI::Range(1, 64))
      ->each(given)
      ->group(kSpecGroup);
  cmd.add_option("--speculative-eagle-topk", d.topk, "Branching per draft step (1 = chain; auto: the most)")
      ->check(CLI::Range(1, 64))
      ->each(given)
      ->group(kSpecGroup);
  cmd.add_option("--speculative-num-draft-tokens", d.num_draft_tokens,
                 "Tokens verified per round, root included (auto: the most)")
      ->check(CLI::Range(2, kMaxDraftTokens))
      ->each(given)
      ->group(kSpecGroup);
  cmd.add_option_function<std::string>(
         "--speculative-sampling",
         [&o](const std::string& s) {
           o.round.scheme = s == "draft-q" ? SpecSampling::DraftQ : SpecSampling::TargetOnly;
         },
         "Verification at temperature > 0: target-only (accept x with p(x)) or draft-q (min(1, p/q) with drafts "
         "sampled from the drafter)")
      ->check(CLI::IsMember({"target-only", "draft-q"}))
      ->group(kSpecGroup);
  cmd.add_option("--speculative-draft-window", o.round.draft_window,
                 "The most tokens the drafter reads when it catches up: its pass over the prompt and (auto) the tokens "
                 "decoded plainly since it last drafted; 0: all of them (SGLang). Default: 64 under auto, 0 under "
                 "static. Output stays the same; acceptance may move")
      ->check(at_least(0))
      ->group(kSpecGroup);
  if (which == RoundFlags::WithLog)
    cmd.add_option("--log-every", o.log_every, "Print the acceptance line and the round's time split every N verifies")
        ->check(at_least(0))
        ->group(kSpecGroup);
}

std::vector<std::string> speculative_flags_given(const CLI::App& cmd) {
  std::vector<std::string> out;
  for (const CLI::Option* o : cmd.get_options([](const CLI::Option* o) { return o->get_group() == kSpecGroup; })) {
    if (o->count() == 0 || o->check_name(kDrafterOption)) continue;
    const std::string name = "--" + o->get_lnames().front();
    if (o->get_expected_min() == 0) {  // a flag: its name alone, as often as given
      out.insert(out.end(), o->count(), name);
      continue;
    }
    for (const std::string& value : o->results()) out.insert(out.end(), {name, value});
  }
  return out;
}

bool draft_shape_given(const CLI::App& cmd) {
  return cmd.count("--speculative-num-steps") + cmd.count("--speculative-eagle-topk") +
             cmd.count("--speculative-num-draft-tokens") >
         0;
}

}  // namespace eaglet::cli
