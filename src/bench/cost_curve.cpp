// eaglet bench cost: the cost of verifying M tokens at once, against one; and a drafter step.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/bench.h"
#include "bench/synthetic.h"
#include "drafter/speculation.h"
#include "generate/generation.h"
#include "kernels/cpu_features.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace eaglet::bench {

namespace {

void time_drafter_step(const BenchArgs& a, Transformer& target, double target_ms) {
  std::string dir = a.spec.drafter;
  if (dir.empty()) {
    if (!a.model.empty()) fail("--drafter-step with -m needs -d DRAFTER");
    const SyntheticShape shape = a.shape == "8b" ? llama31_8b_shape() : llama32_1b_shape();
    dir = a.synthetic_dir + "/synthetic-" + shape.name + "-drafter-" + std::to_string(a.draft_vocab) + "-bf16";
    ensure_synthetic_drafter(dir, shape, a.draft_vocab, DType::BF16, 2);
  }
  auto drafter = Speculation::load_drafter(dir, a.spec.load, target);
  const int ctx = a.contexts[0];
  const int64_t W = 3 * target.config().hidden_size, H = drafter->config().hidden_size;
  KVCache cache = drafter->make_cache(ctx + 16);
  std::vector<float> aux(static_cast<size_t>(256 * W), 0.1f), hidden(static_cast<size_t>(16 * H), 0.1f);
  std::vector<int32_t> tokens(256, 5), positions(256);
  for (int start = 0; start < ctx; start += 256) {
    const int n = std::min(256, ctx - start);
    for (int i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = start + i;
    drafter->forward(cache, {tokens.data(), static_cast<size_t>(n)}, aux.data(), Eagle3Drafter::Input::TargetAux,
                     {positions.data(), static_cast<size_t>(n)}, {}, false);
    cache.commit_all();
  }
  std::printf("\ndrafter %s (draft vocab %lld), after %d cached tokens:\n", dir.c_str(),
              static_cast<long long>(drafter->config().draft_vocab_size), ctx);
  // A greedy chain's step needs only the head's best id: screened where the CPU has it (kernels/screened_argmax.h).
  const std::vector<std::pair<int, Eagle3Drafter::Head>> steps = {
      {1, Eagle3Drafter::Head::Logits}, {4, Eagle3Drafter::Head::Logits}, {1, Eagle3Drafter::Head::Best}};
  for (const auto& [m, head] : steps) {
    for (int i = 0; i < m; ++i) positions[static_cast<size_t>(i)] = ctx;
    double best = 1e30;
    for (int r = 0; r < a.repeats + 1; ++r) {
      Timer t;
      drafter->forward(cache, {tokens.data(), static_cast<size_t>(m)}, hidden.data(), Eagle3Drafter::Input::OwnHidden,
                       {positions.data(), static_cast<size_t>(m)}, {}, true, head);
      best = std::min(best, t.seconds());
      cache.discard_pending();
    }
    const ScreenedArgmax* screen = drafter->head_screen();
    const std::string what = head == Eagle3Drafter::Head::Logits ? ""
                             : screen == nullptr                 ? ", best id only (no screen on this CPU: whole head)"
                             : screen->stats().declined > 0      ? ", best id only (the screen declined: whole head)"
                                                                 : ", best id only (screened head)";
    std::printf("  step of %d token(s)%s: %.2f ms = %.1f%% of a target decode step (%.1f ms)\n", m, what.c_str(),
                best * 1e3, 100.0 * best * 1e3 / target_ms, target_ms);
  }
}

}  // namespace

std::vector<ForwardTime> time_forwards(Transformer& model, const BenchArgs& a, int ctx) {
  const int max_m = *std::max_element(a.batch_sizes.begin(), a.batch_sizes.end());
  std::mt19937 rng(11);
  std::vector<int32_t> tokens(static_cast<size_t>(std::max(max_m, ctx)));
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(model.config().vocab_size));
  KVCache cache = model.make_cache(ctx + max_m);
  for (int start = 0; start < ctx; start += 256) {
    const int n = std::min(256, ctx - start);
    model.forward(cache, {.tokens = {tokens.data() + start, static_cast<size_t>(n)}});
    cache.commit_all();
  }
  // Repeats run round-robin over M, so a slow spell of the machine (other processes, a kernel thread scanning page
  // tables) touches every M alike instead of one point's every repeat; the best of each M is kept.
  std::vector<ForwardTime> out(a.batch_sizes.size(), ForwardTime{1e30, 0});
  for (int r = 0; r < a.repeats; ++r)
    for (size_t i = 0; i < a.batch_sizes.size(); ++i) {
      const int m = a.batch_sizes[i];
      Timer t;
      model.forward(cache, {.tokens = {tokens.data(), static_cast<size_t>(m)}, .all_logits = true});
      out[i] = {std::min(out[i].ms, t.seconds() * 1e3), model.routed_experts_run()};
      cache.discard_pending();
    }
  return out;
}

int run_cost_curve(const BenchArgs& a) {
  set_num_threads(a.bench_threads);
  const std::string dir = model_dir(a);
  auto model = Transformer::load(dir);
  for (const BlockSpec& b : model->config().blocks)
    if (b.mlp == MlpKind::Moe) return run_moe_cost_curve(a, *model, dir);
  const int64_t bytes = weight_bytes_per_token(*model);
  const double params = static_cast<double>(matmul_params_per_token(*model));
  const MachineProbe machine = probe_machine(thread_pool());
  // The projections' format (config.json's quantization_config) decides the kernels; dense ones share the head's dtype.
  const PeakProbe& kernel = kernel_peak(machine.compute, model->lm_head().dtype, model->config().quant.format);
  const double probe = machine.read_gb_s, peak = kernel.gflops;
  std::printf("model: %s, %.2f GB of weights per forward, kernels: %s, %d threads\n", dir.c_str(), bytes / 1e9,
              std::string(isa_name(active_isa())).c_str(), thread_pool().size());
  print_machine_probe(machine, thread_pool().size());
  std::printf(
      "GFLOP/s counts the matmuls of a forward over M tokens, 2 x %.2f G parameters x M (attention not "
      "counted; int8/int4: integer ops); %% of peak is against the probed %.0f of the kernels' instruction (%s)\n\n",
      params / 1e9, peak, kernel.instruction.c_str());
  std::vector<std::vector<double>> ms;
  for (int ctx : a.contexts) {
    ms.emplace_back();
    for (const ForwardTime& t : time_forwards(*model, a, ctx)) ms.back().push_back(t.ms);
  }
  std::printf("| M (new tokens) |");
  for (int ctx : a.contexts) std::printf(" ctx %d: ms | T(M)/T(1) | GFLOP/s | %% of peak |", ctx);
  std::printf("\n|---|");
  for (size_t c = 0; c < a.contexts.size(); ++c) std::printf("---|---|---|---|");
  std::printf("\n");
  for (size_t i = 0; i < a.batch_sizes.size(); ++i) {
    std::printf("| %d |", a.batch_sizes[i]);
    for (size_t c = 0; c < a.contexts.size(); ++c) {
      const double gflops = 2.0 * params * a.batch_sizes[i] / (ms[c][i] / 1e3) / 1e9;
      std::printf(" %.1f | %.2f | %.0f | %s |", ms[c][i], ms[c][i] / ms[c][0], gflops,
                  percent_of(gflops, peak).c_str());
    }
    std::printf("\n");
  }
  const double decode_gb_s = bytes / (ms[0][0] / 1e3) / 1e9;
  std::printf("\ndecode (M=1, ctx %d): %.1f GB/s of weights = %.0f%% of the probed bandwidth\n", a.contexts[0],
              decode_gb_s, 100.0 * decode_gb_s / probe);
  if (a.drafter_step) time_drafter_step(a, *model, ms[0][0]);
  return 0;
}

}  // namespace eaglet::bench
