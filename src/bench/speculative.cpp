// eaglet bench spec -m TARGET -d DRAFTER --prompts FILE (or --echo-pair): plain vs speculative decoding over a prompt
// set.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/bench.h"
#include "bench/synthetic.h"
#include "drafter/eagle3_proposer.h"
#include "drafter/speculation.h"
#include "generate/generation.h"
#include "io/json_util.h"
#include "io/prompts_file.h"
#include "kernels/bandwidth.h"
#include "kernels/cpu_features.h"
#include "model/transformer.h"
#include "speculative/cost_probe.h"
#include "speculative/loop.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/log.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace eaglet::bench {

namespace {

struct Totals {
  int64_t tokens = 0;
  double decode_s = 0, prefill_s = 0, drafter_prefill_s = 0;
  SpecStats stats;
  bool identical = true;
  double tok_s() const { return decode_s > 0 ? static_cast<double>(tokens) / decode_s : 0; }
  // Prompt and decode, the drafter's pass over the prompt included.
  double end_to_end_tok_s() const {
    return decode_s + prefill_s > 0 ? static_cast<double>(tokens) / (decode_s + prefill_s) : 0;
  }
};

void add(Totals& t, const GenerationResult& r, const SpeculativeResult* spec = nullptr) {
  t.tokens += static_cast<int64_t>(r.tokens.size());
  t.decode_s += r.decode_seconds;
  t.prefill_s += r.prefill_seconds;
  if (spec != nullptr) {
    t.stats.merge(spec->stats);
    t.drafter_prefill_s += spec->drafter_prefill_seconds;
  }
}

// A --setting: "auto" (the policy, within auto_draft_limits()) or steps,topk,draft_tokens (static).
struct Setting {
  SpecPolicy policy = SpecPolicy::Static;
  DraftParams params;
};

}  // namespace

std::string echo_pair_dir(const BenchArgs& a) {
  if (a.shape != "1b" && a.shape != "8b") fail("--shape: expected 1b or 8b, found '", a.shape, "'");
  const SyntheticShape shape = a.shape == "8b" ? llama31_8b_shape() : llama32_1b_shape();
  char dev[32];
  std::snprintf(dev, sizeof dev, "%g", a.deviation);
  const std::string dir = a.synthetic_dir + "/synthetic-" + shape.name + "-echo-" + dev;
  log_info("bench: synthetic pair " + dir + " (bigram target of " + shape.name + " shape, drafter built to match it)");
  ensure_echo_pair(dir, shape, a.draft_vocab, a.deviation);
  return dir;
}

std::vector<std::vector<int32_t>> random_prompts(const BenchArgs& a, int64_t vocab_size) {
  std::mt19937 rng(21);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < (a.num_prompts > 0 ? a.num_prompts : 4); ++i) {
    std::vector<int32_t> p(static_cast<size_t>(a.prompt_tokens));
    for (auto& t : p) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab_size));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

int run_speculative(const BenchArgs& a) {
  set_num_threads(a.bench_threads);
  std::vector<Setting> settings;  // parsed first: a bad one fails before any model is loaded
  if (a.spec_setting_given) settings.push_back({a.spec.round.policy, a.spec.round.draft.resolved()});
  for (const std::string& s : a.spec_setting_given ? std::vector<std::string>{} : a.settings) {
    if (s == "auto")
      settings.push_back({SpecPolicy::Auto, auto_draft_limits()});
    else
      settings.push_back({SpecPolicy::Static, parse_draft_setting(s, "--setting")});
  }
  std::string target_dir = a.model, drafter_dir = a.spec.drafter;
  if (a.echo_pair) {
    const std::string dir = echo_pair_dir(a);
    target_dir = dir + "/target";
    drafter_dir = dir + "/drafter";
  } else if (a.model.empty() || a.prompts_file.empty()) {
    fail("bench: speculative mode needs -m TARGET, -d DRAFTER and --prompts FILE (or --echo-pair)");
  }
  auto target = Transformer::load(target_dir);
  auto drafter = Speculation::load_drafter(drafter_dir, a.spec.load, *target);
  Eagle3Proposer proposer(*drafter);
  std::vector<std::vector<int32_t>> prompts;
  if (a.echo_pair) {  // no tokenizer: random token prompts
    prompts = random_prompts(a, target->config().vocab_size);
  } else {
    Tokenizer tokenizer = Tokenizer::load(target_dir);
    check_tokenizer_fits(tokenizer, target->config().vocab_size, target->config().file);
    for (const auto& p : read_prompts_file(a.prompts_file, a.num_prompts))
      prompts.push_back(tokenizer.encode(p, tokenizer.adds_bos()));
  }
  log_info(drafter->describe());  // after the prompts: a bad file fails with one line
  log_configuration("eaglet bench spec",
                    {{"target", target_dir},
                     {"threads", std::to_string(thread_pool().size()) + " threads"},
                     {"prompts", std::to_string(prompts.size()) + " x " + std::to_string(a.max_tokens) + " tokens"},
                     {"sampling", describe(a.sampling)},
                     {"settings", std::to_string(settings.size()) + " draft shape(s)"},
                     {"drafter", drafter_dir}});
  const GenerationLimits limits{a.max_tokens, 0, target->config().eos_token_ids, 256};
  std::shared_ptr<CostModel> costs;
  AcceptancePrior prior;
  std::shared_ptr<AcceptanceModel> acceptance;  // what the sequences of the auto settings learn, prompt after prompt
  if (std::ranges::any_of(settings, [](const Setting& s) { return s.policy == SpecPolicy::Auto; })) {
    int rows = 2;
    for (const Setting& s : settings) rows = std::max(rows, s.params.num_draft_tokens);
    std::string how, note;
    costs = std::make_shared<CostModel>(load_or_probe_costs(
        *target, proposer, Speculation::cost_key(target_dir, drafter_dir, a.spec.load), &how, {.max_rows = rows}));
    prior = AcceptancePrior::from_training_record(drafter_dir, &note);
    if (!note.empty()) log_note(note);
    log_info("cost model (" + how + "): " + costs->describe());
    acceptance = std::make_shared<AcceptanceModel>(prior);
  }

  struct Row {
    std::string setting, scheme;
    SpecPolicy policy = SpecPolicy::Static;
    DraftParams params;
    SpecSampling verification = SpecSampling::TargetOnly;
    bool full_head = false;  // the drafter's head computed whole (the screened head's baseline)
    Totals t;
  };
  std::vector<Row> rows;
  const bool sampled = !a.sampling.greedy();
  const ScreenedArgmax* screen = drafter->head_screen();
  const bool full_asked = std::ranges::find(a.draft_heads, "full") != a.draft_heads.end();
  if (full_asked && screen == nullptr)
    log_note(
        "bench: --draft-head full: this drafter's head is not screened here (needs AVX-512 VNNI and a dense head "
        "of 4 MB or more), so every row already computes the whole head");
  for (const auto& [policy, p] : settings)
    for (SpecSampling scheme : sampled ? std::vector{SpecSampling::TargetOnly, SpecSampling::DraftQ}
                                       : std::vector{SpecSampling::TargetOnly}) {
      // Only greedy chains read the head's best id alone, so only they can differ between the heads.
      const bool best_only =
          policy == SpecPolicy::Static && p.topk == 1 && !(sampled && scheme == SpecSampling::DraftQ);
      std::vector<bool> full_heads = {false};
      if (best_only && screen != nullptr) {
        full_heads.clear();
        for (const std::string& head : a.draft_heads) full_heads.push_back(head == "full");
      }
      for (const bool full : full_heads) {
        const std::string name =
            (policy == SpecPolicy::Auto ? std::string("auto (within ") + p.setting() + ")" : p.label()) +
            (full ? " (full head)" : "");
        rows.push_back({name,
                        !sampled                             ? "greedy"
                        : scheme == SpecSampling::TargetOnly ? "target-only"
                                                             : "draft-q",
                        policy,
                        p,
                        scheme,
                        full,
                        {}});
      }
    }
  // Prompt by prompt, plain then every setting: a drift of the machine's speed shifts all of them alike.
  Totals plain;
  for (const auto& prompt : prompts) {
    GenerationResult plain_run = generate_plain(*target, prompt, a.sampling, limits);
    add(plain, plain_run);
    for (Row& row : rows) {
      drafter->set_head_screen(!row.full_head);
      RoundOptions round = a.spec.round;  // every round-time flag, this row's shape and verification
      round.draft = row.params;
      round.scheme = row.verification;
      round.policy = row.policy;
      const SpeculativeResult r = generate_speculative(
          *target, proposer, prompt, {round, a.sampling, 4096, limits.prefill_batch, costs, prior, acceptance}, limits);
      row.t.identical = row.t.identical && r.tokens == plain_run.tokens;
      add(row.t, r, &r);
    }
  }
  drafter->set_head_screen(true);
  if (a.json) {
    nlohmann::json j = {
        {"target", target_dir},
        {"drafter", drafter_dir},
        {"prompts", prompts.size()},
        {"max_tokens", a.max_tokens},
        {"threads", thread_pool().size()},
        {"temperature", a.sampling.temperature},
        {"plain",
         {{"tokens", plain.tokens}, {"decode_tok_s", plain.tok_s()}, {"end_to_end_tok_s", plain.end_to_end_tok_s()}}}};
    for (const Row& r : rows) {
      j["runs"].push_back({{"setting", r.setting},
                           {"scheme", r.scheme},
                           {"num_steps", r.params.num_steps},
                           {"topk", r.params.topk},
                           {"num_draft_tokens", r.params.num_draft_tokens},
                           {"tokens", r.t.tokens},
                           {"decode_tok_s", r.t.tok_s()},
                           {"speedup", r.t.tok_s() / plain.tok_s()},
                           {"policy", std::string(policy_name(r.policy))},
                           {"end_to_end_tok_s", r.t.end_to_end_tok_s()},
                           {"end_to_end_speedup", r.t.end_to_end_tok_s() / plain.end_to_end_tok_s()},
                           {"drafter_prefill_seconds", r.t.drafter_prefill_s},
                           {"drafts_per_round", r.t.stats.drafts_per_round},
                           {"accept_len", r.t.stats.accept_length()},
                           {"accept_rate", r.t.stats.accept_rate()},
                           {"draft_acceptance", r.t.stats.draft_acceptance()},
                           {"per_depth_acceptance", r.t.stats.per_depth_acceptance()},
                           {"identical_to_plain", r.t.identical},
                           {"full_draft_head", r.full_head},
                           {"round_seconds",
                            {{"draft", r.t.stats.time.draft},
                             {"tree_select", r.t.stats.time.select},
                             {"verify", r.t.stats.time.verify},
                             {"accept_commit", r.t.stats.time.accept_commit},
                             {"drafter_extend", r.t.stats.time.extend}}}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("target %s, drafter %s, %zu prompts x %d tokens, %d threads, temperature %.2f\n", target_dir.c_str(),
              drafter_dir.c_str(), prompts.size(), a.max_tokens, thread_pool().size(), a.sampling.temperature);
  std::printf(
      "| setting (steps/topk/tokens) | verify | decode tok/s | speedup | end-to-end speedup | accept len | accept rate "
      "| draft acceptance | per-depth acceptance | same output as plain "
      "|\n|---|---|---|---|---|---|---|---|---|---|\n");
  std::printf("| plain | - | %.1f | 1.00x | 1.00x | - | - | - | - | - |\n", plain.tok_s());
  for (const Row& r : rows) {
    const std::string depth = r.t.stats.per_depth_line();
    std::printf("| %s | %s | %.1f | %.2fx | %.2fx | %.2f | %.2f | %.1f%% | %s | %s |\n", r.setting.c_str(),
                r.scheme.c_str(), r.t.tok_s(), r.t.tok_s() / plain.tok_s(),
                r.t.end_to_end_tok_s() / plain.end_to_end_tok_s(), r.t.stats.accept_length(), r.t.stats.accept_rate(),
                100.0 * r.t.stats.draft_acceptance(), depth.c_str(),
                sampled         ? "n/a (sampling)"
                : r.t.identical ? "yes"
                                : "NO");
  }
  std::printf(
      "\n(speedup: decode tok/s over plain's; end-to-end: prompt and decode, the drafter's pass over the prompt "
      "included; under auto that pass runs in decode, with the first round that drafts.) Per request: plain %.1f ms "
      "end to end",
      1e3 * (plain.prefill_s + plain.decode_s) / static_cast<double>(prompts.size()));
  for (const Row& r : rows)
    std::printf(", %s %.1f ms (drafter's prompt pass %.2f ms)", r.setting.c_str(),
                1e3 * (r.t.prefill_s + r.t.decode_s) / static_cast<double>(prompts.size()),
                1e3 * r.t.drafter_prefill_s / static_cast<double>(prompts.size()));
  std::printf("\n\n");
  for (const Row& r : rows) {
    std::printf("%s %s: %s\n", r.setting.c_str(), r.scheme.c_str(), r.t.stats.time_line().c_str());
    if (r.policy == SpecPolicy::Auto) std::printf("  %s\n", r.t.stats.shape_line().c_str());
  }
  if (screen != nullptr && screen->stats().rows > 0) {
    const ScreenedArgmax::Stats& st = screen->stats();
    const double served = static_cast<double>(st.rows - st.declined);
    std::printf(
        "\ndrafter head of greedy chains: screened by an int8 copy (%.1f MB); %lld head rows, %lld declined "
        "(whole head), the others computed exactly for %.2f%% of the vocabulary on average\n",
        static_cast<double>(screen->bytes()) / 1e6, static_cast<long long>(st.rows),
        static_cast<long long>(st.declined),
        served > 0 ? 100.0 * static_cast<double>(st.exact_rows) /
                         (served * static_cast<double>(drafter->config().draft_vocab_size))
                   : 0.0);
  }
  return 0;
}

}  // namespace eaglet::bench
