// eaglet bench --peak: what the machine can do (memory bandwidth and compute peak, on one thread and on all) and how
// close the matmul kernels come, over the weight matrices of one layer of --shape, beside oneDNN's bf16 matmul.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "bench/onednn_reference.h"
#include "bench/synthetic.h"
#include "kernels/bandwidth.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/panel_store.h"
#include "kernels/quantized.h"
#include "util/error.h"
#include "util/log.h"
#include "util/thread_pool.h"
#include "util/timer.h"

namespace eaglet::bench {

namespace {

std::string probe_text(const char* what, const PeakProbe& p, const char* unit) {
  char buf[160];
  if (p.skipped.empty())
    std::snprintf(buf, sizeof buf, "%s (%s) %.0f %s", what, p.instruction.c_str(), p.gflops, unit);
  else
    std::snprintf(buf, sizeof buf, "%s skipped: %s", what, p.skipped.c_str());
  return buf;
}

}  // namespace

std::string percent_of(double value, double peak) {
  if (peak <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100.0 * value / peak);
  return buf;
}

namespace {

// The seven matrices of one layer, in the order the model reads them.
struct LayerMatrices {
  WeightMatrix q, k, v, o, gate, up, down;
};

// One transformer layer's matrices, bf16 with random values; q/k/v and gate/up contiguous, as matmul_group reads them;
// in panels where the engine would use them (kernels/bf16_panels.h).
struct LayerWeights {
  std::vector<uint16_t> qkv, o, gate_up, down;
  WeightMatrix q, k, v, o_m, gate, up, down_m;
  PanelStore panels;
  LayerMatrices matrices() const { return {q, k, v, o_m, gate, up, down_m}; }
  std::vector<WeightMatrix> fused() const {  // the same bytes as 4 matrices, for oneDNN
    return {{qkv.data(), DType::BF16, q.rows + k.rows + v.rows, q.cols},
            o_m,
            {gate_up.data(), DType::BF16, gate.rows + up.rows, gate.cols},
            down_m};
  }
  int64_t params() const {
    return (q.rows + k.rows + v.rows + o_m.rows + gate.rows + up.rows) * q.cols + down_m.rows * down_m.cols;
  }
};

void fill_random_bf16(std::vector<uint16_t>& v, size_t n, uint64_t seed) {
  v.resize(n);
  for (auto& h : v) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    h = f32_to_bf16(static_cast<float>(static_cast<int>(seed % 2001) - 1000) * 1e-4f);
  }
}

LayerWeights layer_weights(const SyntheticShape& s) {
  LayerWeights w;
  const int64_t H = s.hidden, qd = s.heads * s.head_dim, kvd = s.kv_heads * s.head_dim, I = s.intermediate;
  fill_random_bf16(w.qkv, static_cast<size_t>((qd + 2 * kvd) * H), 1);
  fill_random_bf16(w.o, static_cast<size_t>(H * qd), 2);
  fill_random_bf16(w.gate_up, static_cast<size_t>(2 * I * H), 3);
  fill_random_bf16(w.down, static_cast<size_t>(H * I), 4);
  w.q = {w.qkv.data(), DType::BF16, qd, H};
  w.k = {w.qkv.data() + qd * H, DType::BF16, kvd, H};
  w.v = {w.qkv.data() + (qd + kvd) * H, DType::BF16, kvd, H};
  w.o_m = {w.o.data(), DType::BF16, H, qd};
  w.gate = {w.gate_up.data(), DType::BF16, I, H};
  w.up = {w.gate_up.data() + I * H, DType::BF16, I, H};
  w.down_m = {w.down.data(), DType::BF16, H, I};
  w.panels.pack(std::array{&w.q, &w.k, &w.v, &w.o_m, &w.gate, &w.up, &w.down_m});
  return w;
}

// The same matrices as int8 codes (one scale per row) or int4 codes (group 32), random, with bf16 scales: what
// `eaglet quantize` writes; in panels where the engine would use them. bytes: codes and scales, what a forward reads.
struct QuantizedLayer {
  std::vector<std::vector<uint8_t>> codes;
  std::vector<std::vector<uint16_t>> scales;
  LayerMatrices m;
  double bytes = 0;
  PanelStore panels;  // where the VNNI kernel reads them (kernels/int_panels.h)
};

QuantizedLayer quantized_layer(const LayerMatrices& dense, WeightFormat format, uint64_t seed) {
  QuantizedLayer l;
  l.m = dense;
  for (WeightMatrix* w : {&l.m.q, &l.m.k, &l.m.v, &l.m.o, &l.m.gate, &l.m.up, &l.m.down}) {
    const bool int4 = format == WeightFormat::Int4Group;
    std::vector<uint8_t>& codes = l.codes.emplace_back(static_cast<size_t>(w->rows * w->cols / (int4 ? 2 : 1)));
    for (uint8_t& c : codes) {
      seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
      c = static_cast<uint8_t>(int4 ? seed : seed % 255 + 129);  // int8: -127..127 as bytes
    }
    std::vector<uint16_t>& scales = l.scales.emplace_back(static_cast<size_t>(w->rows * (int4 ? w->cols / 32 : 1)));
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = f32_to_bf16(1e-3f * static_cast<float>(1 + i % 7));
    *w = {codes.data(), int4 ? DType::I32 : DType::I8, w->rows, w->cols};
    w->format = format;
    w->scales = scales.data();
    w->scale_dtype = DType::BF16;
    w->group = int4 ? 32 : 0;
    l.bytes += static_cast<double>(codes.size() + 2 * scales.size());
  }
  l.panels.pack(std::array{&l.m.q, &l.m.k, &l.m.v, &l.m.o, &l.m.gate, &l.m.up, &l.m.down});
  return l;
}

// Activations for up to max_m rows of any of the layer's inputs, and room for its widest outputs (gate and up).
struct LayerBuffers {
  std::vector<float> x, y;
  LayerBuffers(const SyntheticShape& s, int64_t max_m)
      : x(static_cast<size_t>(max_m * std::max(s.hidden, s.intermediate))),
        y(static_cast<size_t>(max_m * 2 * s.intermediate)) {
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 97) - 48) * 1e-2f;
  }
};

// --peak and --kernel-curve time one dense layer; another --shape is a usage error (exit 2).
bool dense_layer_shape(const BenchArgs& a, const char* mode) {
  if (a.shape == "1b" || a.shape == "8b") return true;
  log_info(
      strprintf("eaglet bench %s: --shape: expected 1b or 8b (one dense layer), found '%s'", mode, a.shape.c_str()));
  return false;
}

// The layer's matmuls as the model issues them (q/k/v and gate/up each in one pass of the pool).
void eaglet_layer(const LayerMatrices& w, const float* x, int64_t M, std::vector<float>& y, ThreadPool& pool) {
  float* out = y.data();
  const int64_t qd = w.q.rows, kvd = w.k.rows, I = w.gate.rows;
  matmul_group({{out, w.q}, {out + M * qd, w.k}, {out + M * (qd + kvd), w.v}}, x, M, pool);
  matmul(out, x, M, w.o, pool);
  matmul_group({{out, w.gate}, {out + M * I, w.up}}, x, M, pool);
  matmul(out, x, M, w.down, pool);
}

// bf16 beside int8 and int4 weights of the same layer, interleaved: GB/s of the bytes each reads, GFLOP/s (int: GOP/s).
void quantized_table(const BenchArgs& a, const MachineProbe& probe, const LayerWeights& w, const float* x,
                     std::vector<float>& y) {
  const LayerMatrices bf16 = w.matrices();
  const QuantizedLayer int8 = quantized_layer(bf16, WeightFormat::Int8Channel, 5);
  const QuantizedLayer int4 = quantized_layer(bf16, WeightFormat::Int4Group, 6);
  struct Row {
    const char* name;
    const LayerMatrices* m;
    double bytes, peak;
  };
  const double int_peak = detail::int_kernel_is_vnni() ? probe.compute.int8_dot.gflops : 0.0;
  const double bf16_peak = kernel_peak(probe.compute, DType::BF16).gflops;
  const Row rows[] = {{"bf16", &bf16, 2.0 * static_cast<double>(w.params()), bf16_peak},
                      {"int8", &int8.m, int8.bytes, int_peak},
                      {"int4", &int4.m, int4.bytes, int_peak}};
  std::printf(
      "\nthe same layer with int8 (a scale per row) and int4 (group 32) weights, random codes and bf16 scales, "
      "%s integer kernel, best of %d interleaved runs (GB/s: weight bytes read, codes and scales; %% of peak: "
      "of the bf16 dot or int8 dot probe; memory probe %.1f GB/s):\n\n",
      detail::int_kernel_is_vnni() ? "avx512_vnni" : "portable", a.repeats, probe.read_gb_s);
  std::printf("| M | weights | ms | GB/s | GFLOP/s | %% of peak |\n|---|---|---|---|---|---|\n");
  for (int m : {1, 8, 32}) {
    double best[3] = {1e30, 1e30, 1e30};
    for (int r = 0; r < a.repeats + 1; ++r)  // the first round warms up
      for (int i = 0; i < 3; ++i) {
        Timer t;
        eaglet_layer(*rows[i].m, x, m, y, thread_pool());
        if (r > 0) best[i] = std::min(best[i], t.seconds());
      }
    for (int i = 0; i < 3; ++i) {
      const double gf = 2.0 * static_cast<double>(w.params()) * m / best[i] / 1e9;
      std::printf("| %d | %s | %.2f | %.1f | %.0f | %s |\n", m, rows[i].name, best[i] * 1e3,
                  rows[i].bytes / best[i] / 1e9, gf, percent_of(gf, rows[i].peak).c_str());
    }
  }
}

void gemm_table(const BenchArgs& a, const MachineProbe& probe) {
  const SyntheticShape shape = a.shape == "8b" ? llama31_8b_shape() : llama32_1b_shape();
  const LayerWeights w = layer_weights(shape);
  const double peak = kernel_peak(probe.compute, DType::BF16).gflops;
  LayerBuffers buffers(shape, std::max(32, *std::max_element(a.batch_sizes.begin(), a.batch_sizes.end())));
  const std::vector<float>& x = buffers.x;
  std::vector<float>& y = buffers.y;
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
  std::printf(
      "\nmatmuls of one %s layer (%.1f M bf16 parameters: q/k/v, o, gate/up, down), %s kernels, best of %d "
      "interleaved runs:\n\n",
      shape.name.c_str(), w.params() / 1e6, std::string(isa_name(active_isa())).c_str(), a.repeats);
  std::printf(
      "| M | eaglet ms | eaglet GFLOP/s | %% of peak | oneDNN ms | oneDNN GFLOP/s |\n|---|---|---|---|---|---|\n");
  std::string why_not, implementation;
  for (int m : a.batch_sizes) {
    const auto ref = OnednnReference::create(w.fused(), m, &why_not);
    if (ref) implementation = ref->implementation();
    // Interleaved, so that each run finds the weights out of the last-level cache (the other's copy went through
    // it). oneDNN's OpenMP workers keep spinning for milliseconds after a call (libgomp's default spin count;
    // OMP_WAIT_POLICY is read when the library loads) and shared the two cores with eaglet's next run, doubling its
    // times on the 2-core Zen 5: the pause after each oneDNN run lets them go to sleep first.
    double best = 1e30, best_ref = 1e30;
    for (int r = 0; r < a.repeats + 1; ++r) {  // the first round warms up both
      Timer t;
      eaglet_layer(w.matrices(), x.data(), m, y, thread_pool());
      if (r > 0) best = std::min(best, t.seconds());
      if (ref) {
        Timer tr;
        ref->run(xb.data());
        if (r > 0) best_ref = std::min(best_ref, tr.seconds());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    const double flops = 2.0 * static_cast<double>(w.params()) * m, gf = flops / best / 1e9;
    std::printf("| %d | %.2f | %.0f | %s |", m, best * 1e3, gf, percent_of(gf, peak).c_str());
    if (ref)
      std::printf(" %.2f | %.0f |\n", best_ref * 1e3, flops / best_ref / 1e9);
    else
      std::printf(" - | - |\n");
  }
  if (!why_not.empty())
    std::printf("\noneDNN reference: %s\n", why_not.c_str());
  else
    std::printf(
        "\noneDNN (%s): its bf16 matmul with weights reordered to its own layout beforehand, activations "
        "given in bf16 (eaglet's times include rounding them); a reference only, the engine does not use it.\n",
        implementation.c_str());
  quantized_table(a, probe, w, x.data(), y);
}

}  // namespace

MachineProbe probe_machine(ThreadPool& pool) { return {probe_read_bandwidth(pool), probe_compute_peak(pool)}; }

void print_read_probe(double gb_s, int threads) {
  std::printf("memory read bandwidth (probe, %d thread%s): %.1f GB/s\n", threads, threads == 1 ? "" : "s", gb_s);
}

void print_machine_probe(const MachineProbe& p, int threads) {
  print_read_probe(p.read_gb_s, threads);
  std::printf("compute peak (probe, %d thread%s): %s, %s, %s\n", threads, threads == 1 ? "" : "s",
              probe_text("fp32 FMA", p.compute.fp32_fma, "GFLOP/s").c_str(),
              probe_text("bf16 dot", p.compute.bf16_dot, "GFLOP/s").c_str(),
              probe_text("int8 dot", p.compute.int8_dot, "GOP/s").c_str());
}

const PeakProbe& kernel_peak(const ComputePeak& peak, DType dtype, WeightFormat format) {
  switch (format) {
    case WeightFormat::Int8Channel:
    case WeightFormat::Int4Group: return detail::int_kernel_is_vnni() ? peak.int8_dot : peak.fp32_fma;
    case WeightFormat::Fp8Block: return active_isa() == Isa::Avx512Bf16 ? peak.bf16_dot : peak.fp32_fma;
    case WeightFormat::Dense: break;
  }
  return dtype == DType::BF16 && active_isa() == Isa::Avx512Bf16 ? peak.bf16_dot : peak.fp32_fma;
}

// --kernel-curve: the layer's matmuls alone, over 4 distinct copies of the layer so that the weights stream from
// memory (past the last-level cache) as a forward's layers do; the M values round-robin within each round, the best
// round kept. Timed by the calling thread's CPU time on one thread (other processes on a shared machine do not count),
// by the wall clock on several.
int run_kernel_curve(const BenchArgs& a) {
  if (!dense_layer_shape(a, "--kernel-curve")) return 2;
  set_num_threads(a.bench_threads);
  ThreadPool& pool = thread_pool();
  const SyntheticShape shape = a.shape == "8b" ? llama31_8b_shape() : llama32_1b_shape();
  constexpr int kCopies = 4;
  std::vector<LayerWeights> layers;
  for (int i = 0; i < kCopies; ++i) layers.push_back(layer_weights(shape));
  const int64_t params = layers[0].params();
  LayerBuffers buffers(shape, *std::max_element(a.batch_sizes.begin(), a.batch_sizes.end()));
  const std::vector<float>& x = buffers.x;
  std::vector<float>& y = buffers.y;
  const bool cpu_time = pool.size() == 1;
  std::vector<double> best(a.batch_sizes.size(), 1e30);
  for (int r = 0; r < a.repeats + 1; ++r)  // the first round warms up
    for (size_t i = 0; i < a.batch_sizes.size(); ++i) {
      const double t0 = cpu_time ? thread_cpu_seconds() : 0.0;
      Timer wall;
      for (const LayerWeights& l : layers) eaglet_layer(l.matrices(), x.data(), a.batch_sizes[i], y, pool);
      const double t = (cpu_time ? thread_cpu_seconds() - t0 : wall.seconds()) / kCopies;
      if (r > 0) best[i] = std::min(best[i], t);
    }
  std::printf(
      "matmuls of one %s layer (%.1f M bf16 parameters), %d copies (%.0f MB), %s kernels, %d thread(s), %s, "
      "best of %d rounds:\n\n| M | ms per layer | GB/s of weights | GFLOP/s | T(M)/T(1) |\n|---|---|---|---|---|\n",
      shape.name.c_str(), params / 1e6, kCopies, kCopies * 2.0 * static_cast<double>(params) / 1e6,
      std::string(isa_name(active_isa())).c_str(), pool.size(), cpu_time ? "thread CPU time" : "wall clock", a.repeats);
  const auto one = std::find(a.batch_sizes.begin(), a.batch_sizes.end(), 1);
  for (size_t i = 0; i < a.batch_sizes.size(); ++i) {
    const double gb = 2.0 * static_cast<double>(params) / best[i] / 1e9;
    const double gflops = 2.0 * static_cast<double>(params) * a.batch_sizes[i] / best[i] / 1e9;
    std::printf("| %d | %.2f | %.1f | %.0f | ", a.batch_sizes[i], best[i] * 1e3, gb, gflops);
    if (one != a.batch_sizes.end())
      std::printf("%.2f |\n", best[i] / best[static_cast<size_t>(one - a.batch_sizes.begin())]);
    else
      std::printf("- |\n");
  }
  return 0;
}

int run_peak(const BenchArgs& a) {
  if (!dense_layer_shape(a, "--peak")) return 2;
  set_num_threads(a.bench_threads);
  const int all = thread_pool().size();
  ThreadPool one(1);
  print_machine_probe(probe_machine(one), 1);
  const MachineProbe probe = probe_machine(thread_pool());
  print_machine_probe(probe, all);
  gemm_table(a, probe);
  return 0;
}

}  // namespace eaglet::bench
