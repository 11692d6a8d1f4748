// eaglet bench: measured speed, printed (never asserted).
//   --plain: prefill and decode tok/s of a target at several thread counts and the weight bandwidth of decoding;
//            without -m, a model of Llama-3.2-1B (or 8B) shape with random bf16 weights is made on the fly.
//   -d DRAFTER --prompts FILE: plain vs speculative decoding over a prompt set, for chain and tree settings.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/spec_flags.h"
#include "io/tokenizer.h"
#include "kernels/bandwidth.h"
#include "kernels/cpu_features.h"
#include "model/synthetic.h"
#include "model/transformer.h"
#include "spec/drafter.h"
#include "spec/generation.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace eaglet::cli {

namespace {

struct BenchArgs {
  bool plain = false, json = false, cost_curve = false, drafter_step = false, echo_pair = false;
  float deviation = 0.0f;
  int draft_vocab = 32000;
  std::vector<int> batch_sizes = {1, 2, 4, 8, 16, 32, 64}, contexts = {512, 2048};
  int repeats = 3;
  std::string model, shape = "1b", synthetic_dir = "models";
  int prompt_tokens = 128, decode_tokens = 32;
  std::vector<int> threads = {1, 2};
  // speculative
  std::string drafter, prompts_file;
  int num_prompts = 0, max_tokens = 128, bench_threads = 0;
  std::vector<std::string> settings = {"5,1,6", "5,4,8", "6,8,16"};
  SamplingParams sampling;
  std::string aux_convention;
};

struct PlainResult {
  int threads;
  double prefill_tok_s, decode_tok_s, decode_gb_s;
};

PlainResult measure(Transformer& model, int threads, const BenchArgs& a, int64_t decode_bytes) {
  set_num_threads(threads);
  const int64_t vocab = model.config().vocab_size;
  std::mt19937 rng(7);
  std::vector<int32_t> prompt(static_cast<size_t>(a.prompt_tokens));
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  KVCache cache = model.make_cache(a.prompt_tokens + a.decode_tokens + 1);
  model.forward(cache, {.tokens = {prompt.data(), 8}});  // warm-up: page in the weights
  cache.truncate(0);
  Timer prefill;
  model.forward(cache, {.tokens = prompt});
  cache.commit_all();
  const double prefill_s = prefill.seconds();
  int32_t token = prompt.back();
  Timer decode;
  for (int i = 0; i < a.decode_tokens; ++i) {
    model.forward(cache, {.tokens = {&token, 1}});
    cache.commit_all();
    token = static_cast<int32_t>((token * 31 + 7) % vocab);
  }
  const double decode_s = decode.seconds();
  const double tok_s = a.decode_tokens / decode_s;
  return {threads, a.prompt_tokens / prefill_s, tok_s, tok_s * static_cast<double>(decode_bytes) / 1e9};
}

int64_t weight_bytes_per_token(const Transformer& model) {
  const ModelConfig& c = model.config();
  const int64_t per_layer = c.hidden_size * (2 * c.q_dim() + 2 * c.kv_dim()) + 3 * c.hidden_size * c.intermediate_size;
  return static_cast<int64_t>(dtype_size(model.lm_head().dtype)) *
         (c.num_layers * per_layer + c.vocab_size * c.hidden_size);
}

// -m DIR, or a synthetic model of --shape written once under --synthetic-dir.
std::string model_dir(const BenchArgs& a) {
  if (!a.model.empty()) return a.model;
  if (a.shape != "1b" && a.shape != "8b") fail("--shape: expected 1b or 8b, found '", a.shape, "'");
  const SyntheticShape shape = a.shape == "8b" ? llama31_8b_shape() : llama32_1b_shape();
  const std::string dir = a.synthetic_dir + "/synthetic-" + shape.name + "-bf16";
  std::fprintf(stderr, "bench: using %s (random bf16 weights, %s shape; written once)\n", dir.c_str(), shape.name.c_str());
  ensure_synthetic_model(dir, shape, DType::BF16, 1);
  return dir;
}

// One drafter step (one layer + lm_head over the draft vocabulary) after a cached context, against a target step.
void time_drafter_step(const BenchArgs& a, Transformer& target, double target_ms) {
  std::string dir = a.drafter;
  if (dir.empty()) {
    if (!a.model.empty()) fail("--drafter-step with -m needs -d DRAFTER");
    const SyntheticShape shape = a.shape == "8b" ? llama31_8b_shape() : llama32_1b_shape();
    dir = a.synthetic_dir + "/synthetic-" + shape.name + "-drafter-" + std::to_string(a.draft_vocab) + "-bf16";
    ensure_synthetic_drafter(dir, shape, a.draft_vocab, DType::BF16, 2);
  }
  auto drafter = Drafter::load(dir, target, {});
  const int ctx = a.contexts[0];
  const int64_t W = 3 * target.config().hidden_size, H = drafter->config().hidden_size;
  KVCache cache = drafter->make_cache(ctx + 16);
  std::vector<float> aux(static_cast<size_t>(256 * W), 0.1f), hidden(static_cast<size_t>(16 * H), 0.1f);
  std::vector<int32_t> tokens(256, 5), positions(256);
  for (int start = 0; start < ctx; start += 256) {
    const int n = std::min(256, ctx - start);
    for (int i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = start + i;
    drafter->forward(cache, {tokens.data(), static_cast<size_t>(n)}, aux.data(), Drafter::Input::TargetAux,
                     {positions.data(), static_cast<size_t>(n)}, {}, false);
    cache.commit_all();
  }
  std::printf("\ndrafter %s (draft vocab %lld), after %d cached tokens:\n", dir.c_str(),
              static_cast<long long>(drafter->config().draft_vocab_size), ctx);
  for (int m : {1, 4}) {
    for (int i = 0; i < m; ++i) positions[static_cast<size_t>(i)] = ctx;
    double best = 1e30;
    for (int r = 0; r < a.repeats + 1; ++r) {
      Timer t;
      drafter->forward(cache, {tokens.data(), static_cast<size_t>(m)}, hidden.data(), Drafter::Input::OwnHidden,
                       {positions.data(), static_cast<size_t>(m)}, {}, true);
      best = std::min(best, t.seconds());
      cache.discard_pending();
    }
    std::printf("  step of %d token(s): %.2f ms = %.1f%% of a target decode step (%.1f ms)\n", m, best * 1e3,
                100.0 * best * 1e3 / target_ms, target_ms);
  }
}

// Time of one target forward over M new tokens (all logits, as verification needs) after `ctx` cached tokens.
int run_cost_curve(const BenchArgs& a) {
  set_num_threads(a.bench_threads);
  const std::string dir = model_dir(a);
  auto model = Transformer::load(dir);
  const int64_t bytes = weight_bytes_per_token(*model), vocab = model->config().vocab_size;
  const double probe = probe_read_bandwidth(thread_pool());
  std::printf("model: %s, %.2f GB of weights per forward, kernels: %s, %d threads\n", dir.c_str(), bytes / 1e9,
              std::string(isa_name(active_isa())).c_str(), thread_pool().size());
  std::printf("memory read bandwidth (probe, %d threads): %.1f GB/s\n\n", thread_pool().size(), probe);
  const int max_m = *std::max_element(a.batch_sizes.begin(), a.batch_sizes.end());
  std::mt19937 rng(11);
  std::vector<int32_t> tokens(static_cast<size_t>(std::max(max_m, *std::max_element(a.contexts.begin(), a.contexts.end()))));
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  std::vector<std::vector<double>> ms(a.contexts.size());
  for (size_t c = 0; c < a.contexts.size(); ++c) {
    const int ctx = a.contexts[c];
    KVCache cache = model->make_cache(ctx + max_m);
    for (int start = 0; start < ctx; start += 256) {
      const int n = std::min(256, ctx - start);
      model->forward(cache, {.tokens = {tokens.data() + start, static_cast<size_t>(n)}});
      cache.commit_all();
    }
    for (int m : a.batch_sizes) {
      double best = 1e30;
      for (int r = 0; r < a.repeats; ++r) {
        Timer t;
        model->forward(cache, {.tokens = {tokens.data(), static_cast<size_t>(m)}, .all_logits = true});
        best = std::min(best, t.seconds());
        cache.discard_pending();
      }
      ms[c].push_back(best * 1e3);
    }
  }
  std::printf("| M (new tokens) |");
  for (int ctx : a.contexts) std::printf(" ctx %d: ms | T(M)/T(1) |", ctx);
  std::printf("\n|---|");
  for (size_t c = 0; c < a.contexts.size(); ++c) std::printf("---|---|");
  std::printf("\n");
  for (size_t i = 0; i < a.batch_sizes.size(); ++i) {
    std::printf("| %d |", a.batch_sizes[i]);
    for (size_t c = 0; c < a.contexts.size(); ++c) std::printf(" %.1f | %.2f |", ms[c][i], ms[c][i] / ms[c][0]);
    std::printf("\n");
  }
  const double decode_gb_s = bytes / (ms[0][0] / 1e3) / 1e9;
  std::printf("\ndecode (M=1, ctx %d): %.1f GB/s of weights = %.0f%% of the probed bandwidth\n", a.contexts[0],
              decode_gb_s, 100.0 * decode_gb_s / probe);
  if (a.drafter_step) time_drafter_step(a, *model, ms[0][0]);
  return 0;
}

int run_plain(const BenchArgs& a) {
  const std::string dir = model_dir(a);
  auto model = Transformer::load(dir);
  const int64_t decode_bytes = weight_bytes_per_token(*model);
  std::vector<PlainResult> results;
  for (int t : a.threads) results.push_back(measure(*model, t, a, decode_bytes));
  if (a.json) {
    nlohmann::json j = {{"model", dir}, {"isa", std::string(isa_name(active_isa()))}, {"decode_weight_bytes", decode_bytes}};
    for (const auto& r : results)
      j["runs"].push_back({{"threads", r.threads}, {"prefill_tok_s", r.prefill_tok_s}, {"decode_tok_s", r.decode_tok_s},
                           {"decode_gb_s", r.decode_gb_s}});
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model: %s (%.2f GB of weights streamed per decoded token), kernels: %s\n", dir.c_str(),
              static_cast<double>(decode_bytes) / 1e9, std::string(isa_name(active_isa())).c_str());
  std::printf("| threads | prefill tok/s (%d tokens) | decode tok/s | decode GB/s |\n", a.prompt_tokens);
  std::printf("|---|---|---|---|\n");
  for (const auto& r : results)
    std::printf("| %d | %.1f | %.2f | %.1f |\n", r.threads, r.prefill_tok_s, r.decode_tok_s, r.decode_gb_s);
  return 0;
}

std::vector<std::string> read_prompts(const std::string& path, int limit) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open");
  std::vector<std::string> prompts;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    if (line[0] == '{') {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        fail(path, ":", line_no, ": not valid JSON (", e.what(), ")");
      }
      if (!j.contains("prompt") || !j["prompt"].is_string()) fail(path, ":", line_no, ": no string field 'prompt'");
      prompts.push_back(j["prompt"].get<std::string>());
    } else {
      prompts.push_back(line);
    }
    if (limit > 0 && static_cast<int>(prompts.size()) >= limit) break;
  }
  if (prompts.empty()) fail(path, ": no prompts");
  return prompts;
}

struct Totals {
  int64_t tokens = 0;
  double decode_s = 0;
  SpecStats stats;
  bool identical = true;
  double tok_s() const { return decode_s > 0 ? static_cast<double>(tokens) / decode_s : 0; }
};

void add(Totals& t, const GenerationResult& r) {
  t.tokens += static_cast<int64_t>(r.tokens.size());
  t.decode_s += r.decode_seconds;
  SpecStats& s = t.stats;
  s.num_draft_tokens = r.stats.num_draft_tokens;
  s.verifies += r.stats.verifies;
  s.accepted += r.stats.accepted;
  s.drafted += r.stats.drafted;
  if (s.depth_reached.size() < r.stats.depth_reached.size()) {
    s.depth_reached.resize(r.stats.depth_reached.size(), 0);
    s.depth_accepted.resize(r.stats.depth_reached.size(), 0);
  }
  for (size_t d = 0; d < r.stats.depth_reached.size(); ++d) {
    s.depth_reached[d] += r.stats.depth_reached[d];
    s.depth_accepted[d] += r.stats.depth_accepted[d];
  }
}

int run_speculative(const BenchArgs& a) {
  set_num_threads(a.bench_threads);
  std::string target_dir = a.model, drafter_dir = a.drafter;
  if (a.echo_pair) {
    if (a.shape != "1b" && a.shape != "8b") fail("--shape: expected 1b or 8b, found '", a.shape, "'");
    const SyntheticShape shape = a.shape == "8b" ? llama31_8b_shape() : llama32_1b_shape();
    char dev[32];
    std::snprintf(dev, sizeof dev, "%g", a.deviation);
    const std::string dir = a.synthetic_dir + "/synthetic-" + shape.name + "-echo-" + dev;
    std::fprintf(stderr, "bench: synthetic pair %s (bigram target of %s shape, drafter built to match it)\n",
                 dir.c_str(), shape.name.c_str());
    ensure_echo_pair(dir, shape, a.draft_vocab, a.deviation);
    target_dir = dir + "/target";
    drafter_dir = dir + "/drafter";
  } else if (a.model.empty() || a.prompts_file.empty()) {
    fail("bench: speculative mode needs -m TARGET, -d DRAFTER and --prompts FILE (or --echo-pair)");
  }
  auto target = Transformer::load(target_dir);
  std::optional<AuxConvention> conv;
  if (!a.aux_convention.empty()) conv = a.aux_convention == "output" ? AuxConvention::Output : AuxConvention::Input;
  auto drafter = Drafter::load(drafter_dir, *target, {.aux_convention = conv});
  std::fprintf(stderr, "%s\n", drafter->describe().c_str());
  std::vector<std::vector<int32_t>> prompts;
  if (a.echo_pair) {  // no tokenizer: random token prompts
    std::mt19937 rng(21);
    for (int i = 0; i < (a.num_prompts > 0 ? a.num_prompts : 4); ++i) {
      std::vector<int32_t> p(static_cast<size_t>(a.prompt_tokens));
      for (auto& t : p) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(target->config().vocab_size));
      prompts.push_back(std::move(p));
    }
  } else {
    Tokenizer tokenizer = Tokenizer::load(target_dir);
    for (const auto& p : read_prompts(a.prompts_file, a.num_prompts)) prompts.push_back(tokenizer.encode(p, tokenizer.adds_bos()));
  }
  const GenerationLimits limits{a.max_tokens, 0, target->config().eos_token_ids, 256};

  Totals plain;
  std::vector<std::vector<int32_t>> plain_out;
  for (const auto& p : prompts) {
    GenerationResult r = generate_plain(*target, p, a.sampling, limits);
    add(plain, r);
    plain_out.push_back(r.tokens);
  }
  struct Row {
    std::string setting, scheme;
    DraftParams params;
    Totals t;
  };
  std::vector<Row> rows;
  const bool sampled = !a.sampling.greedy();
  for (const std::string& s : a.settings) {
    const auto v = parse_int_list(s, "--setting");
    if (v.size() != 3 || v[0] < 1 || v[1] < 1 || v[2] < 2) fail("--setting '", s, "': expected steps,topk,draft_tokens");
    DraftParams p{v[0], v[1], v[1] == 1 ? v[0] + 1 : v[2]};
    const std::string name = (p.topk == 1 ? "chain " : "tree ") + std::to_string(p.num_steps) + "/" +
                             std::to_string(p.topk) + "/" + std::to_string(p.num_draft_tokens);
    for (SpecSampling scheme : sampled ? std::vector{SpecSampling::TargetOnly, SpecSampling::DraftQ}
                                       : std::vector{SpecSampling::TargetOnly}) {
      Row row{name, !sampled ? "greedy" : scheme == SpecSampling::TargetOnly ? "target-only" : "draft-q", p, {}};
      for (size_t i = 0; i < prompts.size(); ++i) {
        GenerationResult r = generate_speculative(*target, *drafter, prompts[i], {p, scheme, a.sampling}, limits);
        row.t.identical = row.t.identical && r.tokens == plain_out[i];
        add(row.t, r);
      }
      rows.push_back(std::move(row));
    }
  }
  if (a.json) {
    nlohmann::json j = {{"target", target_dir}, {"drafter", drafter_dir}, {"prompts", prompts.size()},
                        {"max_tokens", a.max_tokens}, {"threads", thread_pool().size()},
                        {"temperature", a.sampling.temperature},
                        {"plain", {{"tokens", plain.tokens}, {"decode_tok_s", plain.tok_s()}}}};
    for (const Row& r : rows) {
      std::vector<double> depth;
      for (size_t d = 0; d < r.t.stats.depth_reached.size(); ++d)
        depth.push_back(r.t.stats.depth_reached[d] ? static_cast<double>(r.t.stats.depth_accepted[d]) / r.t.stats.depth_reached[d] : 0.0);
      j["runs"].push_back({{"setting", r.setting}, {"scheme", r.scheme}, {"num_steps", r.params.num_steps},
                           {"topk", r.params.topk}, {"num_draft_tokens", r.params.num_draft_tokens},
                           {"tokens", r.t.tokens}, {"decode_tok_s", r.t.tok_s()},
                           {"speedup", r.t.tok_s() / plain.tok_s()}, {"accept_len", r.t.stats.accept_length()},
                           {"accept_rate", r.t.stats.accept_rate()}, {"draft_acceptance", r.t.stats.draft_acceptance()},
                           {"per_depth_acceptance", depth}, {"identical_to_plain", r.t.identical}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("target %s, drafter %s, %zu prompts x %d tokens, %d threads, temperature %.2f\n", target_dir.c_str(),
              drafter_dir.c_str(), prompts.size(), a.max_tokens, thread_pool().size(), a.sampling.temperature);
  std::printf("| setting (steps/topk/tokens) | verify | decode tok/s | speedup | accept len | accept rate | "
              "draft acceptance | per-depth acceptance | same output as plain |\n|---|---|---|---|---|---|---|---|---|\n");
  std::printf("| plain | - | %.1f | 1.00x | - | - | - | - | - |\n", plain.tok_s());
  for (const Row& r : rows) {
    std::string depth;
    char buf[32];
    for (size_t d = 0; d < r.t.stats.depth_reached.size(); ++d) {
      std::snprintf(buf, sizeof buf, "%s%.2f", d ? " " : "",
                    r.t.stats.depth_reached[d] ? static_cast<double>(r.t.stats.depth_accepted[d]) / r.t.stats.depth_reached[d] : 0.0);
      depth += buf;
    }
    std::printf("| %s | %s | %.1f | %.2fx | %.2f | %.2f | %.1f%% | %s | %s |\n", r.setting.c_str(), r.scheme.c_str(),
                r.t.tok_s(), r.t.tok_s() / plain.tok_s(), r.t.stats.accept_length(), r.t.stats.accept_rate(),
                100.0 * r.t.stats.draft_acceptance(), depth.c_str(),
                sampled ? "n/a (sampling)" : r.t.identical ? "yes" : "NO");
  }
  return 0;
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks (printed, never asserted)");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_flag("--plain", a->plain, "Plain decoding: prefill and decode tok/s, decode GB/s");
  cmd->add_flag("--cost-curve", a->cost_curve, "Time of one forward over M = 1..64 new tokens, as T(M)/T(1)");
  cmd->add_option("--batch-sizes", a->batch_sizes, "M values for --cost-curve")->delimiter(',');
  cmd->add_option("--contexts", a->contexts, "Cached context lengths for --cost-curve")->delimiter(',');
  cmd->add_option("--repeats", a->repeats, "Timings per point (the best is kept)")->check(CLI::PositiveNumber);
  cmd->add_flag("--drafter-step", a->drafter_step,
                "With --cost-curve: time one drafter step against a target step (synthetic drafter of the shape, or -d)");
  cmd->add_option("--draft-vocab", a->draft_vocab, "Draft vocabulary of the synthetic drafter")->check(CLI::PositiveNumber);
  cmd->add_option("-m,--model", a->model, "Target model folder (--plain: default a synthetic model of --shape)");
  cmd->add_option("--shape", a->shape, "Synthetic model shape for --plain: 1b (Llama-3.2-1B) or 8b (Llama-3.1-8B)");
  cmd->add_option("--synthetic-dir", a->synthetic_dir, "Where synthetic models are written");
  cmd->add_option("--prompt-tokens", a->prompt_tokens, "Prefill length (--plain, --echo-pair)")->check(CLI::Range(8, 8192));
  cmd->add_option("--decode-tokens", a->decode_tokens, "Decode steps (--plain)")->check(CLI::PositiveNumber);
  cmd->add_option("--threads", a->threads, "Thread counts to measure (--plain), e.g. --threads 1,2")->delimiter(',');
  cmd->add_option("-d,--draft-model", a->drafter, "EAGLE-3 drafter: plain vs speculative over --prompts");
  cmd->add_option("--prompts", a->prompts_file, "Prompt file: JSON lines with a 'prompt' field, or one prompt per line");
  cmd->add_option("--num-prompts", a->num_prompts, "Use only the first N prompts")->check(CLI::NonNegativeNumber);
  cmd->add_option("-n,--max-tokens", a->max_tokens, "Tokens generated per prompt")->check(CLI::PositiveNumber);
  cmd->add_option("--setting", a->settings, "Draft settings steps,topk,draft_tokens (repeatable; topk 1 = chain)");
  cmd->add_option("--temp", a->sampling.temperature, "Temperature (> 0 reports both verification schemes)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--seed", a->sampling.seed, "Sampling seed");
  cmd->add_option("-t", a->bench_threads, "Threads for the speculative benchmark (default: all cores)");
  cmd->add_option("--aux-layer-convention", a->aux_convention, "input or output (see generate)")
      ->check(CLI::IsMember({"input", "output"}));
  cmd->add_flag("--echo-pair", a->echo_pair,
                "Speculative benchmark on a synthetic pair of --shape: a bigram target and a drafter built to match it "
                "(random prompts of --prompt-tokens)");
  cmd->add_option("--deviation", a->deviation, "How far the echo target strays from its bigram map (0: never)")
      ->check(CLI::Range(0.0, 10.0));
  cmd->add_flag("--json", a->json, "Print JSON instead of a table");
  return [a] {
    if (a->cost_curve) return run_cost_curve(*a);
    if (!a->drafter.empty() || a->echo_pair) return run_speculative(*a);
    if (!a->plain) fail("bench: choose --plain, or -d DRAFTER --prompts FILE for speculative decoding");
    return run_plain(*a);
  };
}

}  // namespace eaglet::cli
