// Int8Channel and Int4Group matmuls: the portable kernel on hand-computed matrices, the AVX-512 VNNI kernel against
// it and against the fp32 meaning of the codes, bit-identical rows whatever the batch and the row split, and the
// vectorized activation quantization against the plain one.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "isa_test.h"
#include "kernels/cpu_features.h"
#include "kernels/int_panels.h"
#include "kernels/matmul.h"
#include "kernels/panel_store.h"
#include "kernels/quantized.h"
#include "util/thread_pool.h"

namespace eaglet {
namespace {

// A quantized matrix with its storage.
struct Quantized {
  std::vector<int8_t> codes8;
  std::vector<uint32_t> words;  // int4: nibble c % 8 of word c / 8 holds code + 8
  std::vector<float> scales_f32;
  std::vector<uint16_t> scales_16;
  WeightMatrix w;
};

void set_scales(Quantized& q, const std::vector<float>& scales, DType dtype) {
  q.scales_f32 = scales;
  for (float s : scales) q.scales_16.push_back(dtype == DType::F16 ? f32_to_f16(s) : f32_to_bf16(s));
  q.w.scales = dtype == DType::F32 ? static_cast<const void*>(q.scales_f32.data()) : q.scales_16.data();
  q.w.scale_dtype = dtype;
}

Quantized random_int8(int64_t N, int64_t K, DType scale_dtype, std::mt19937& rng) {
  Quantized q;
  std::uniform_int_distribution<int> code(-128, 127);
  for (int64_t i = 0; i < N * K; ++i) q.codes8.push_back(static_cast<int8_t>(code(rng)));
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  std::vector<float> s(static_cast<size_t>(N));
  for (float& v : s) v = scale(rng);
  q.w = {q.codes8.data(), DType::I8, N, K};
  q.w.format = WeightFormat::Int8Channel;
  set_scales(q, s, scale_dtype);
  return q;
}

Quantized random_int4(int64_t N, int64_t K, int64_t group, DType scale_dtype, std::mt19937& rng) {
  Quantized q;
  std::uniform_int_distribution<uint32_t> word;
  for (int64_t i = 0; i < N * K / 8; ++i) q.words.push_back(word(rng));
  std::uniform_real_distribution<float> scale(0.01f, 0.2f);
  std::vector<float> s(static_cast<size_t>(N * K / group));
  for (float& v : s) v = scale(rng);
  q.w = {q.words.data(), DType::I32, N, K};
  q.w.format = WeightFormat::Int4Group;
  q.w.group = group;
  set_scales(q, s, scale_dtype);
  return q;
}

std::vector<float> random_activations(int64_t M, int64_t K, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(M * K));
  for (float& v : x) v = dist(rng);
  if (K > 40) std::fill_n(x.begin(), 32, 0.0f);  // a zero block in row 0
  return x;
}

bool have_vnni() { return cpu_features().avx512_vnni; }

class QuantizedMatmul : public ::testing::Test {
 protected:
  void TearDown() override { set_active_isa(Isa::Avx512Bf16); }  // clamped to the best this CPU has
};

// ---------------------------------------------------------------------------------------------------------------
// The definition, worked out by hand.

TEST_F(QuantizedMatmul, Int8HandComputed) {
  const int8_t codes[] = {1, -2, 3, -127, 0, 5};
  const float scales[] = {0.5f, 2.0f};
  WeightMatrix w{codes, DType::I8, 2, 3};
  w.format = WeightFormat::Int8Channel;
  w.scales = scales;
  float row[3];
  dequantize_row(w, 1, row);
  EXPECT_EQ(row[0], -254.0f);
  EXPECT_EQ(row[1], 0.0f);
  EXPECT_EQ(row[2], 10.0f);
  // absmax 63.5: activation scale 0.5, codes 127, 10, -1 (exact)
  const float x[] = {63.5f, 5.0f, -0.5f};
  QuantizedActivations q;
  q.quantize(x, 3, 1, 3);
  ASSERT_EQ(q.kp, 32);
  EXPECT_EQ(q.codes[0], 127);
  EXPECT_EQ(q.codes[1], 10);
  EXPECT_EQ(q.codes[2], -1);
  EXPECT_EQ(q.codes[3], 0);
  EXPECT_EQ(q.scales[0], 0.5f);
  EXPECT_EQ(q.sums[0], 136);
  float y[2] = {NAN, NAN};
  detail::matmul_rows_int_portable(y, q, w, 0, 2);
  EXPECT_EQ(y[0], 26.0f);      // 0.5 · 0.5 · (127 - 20 - 3)
  EXPECT_EQ(y[1], -16134.0f);  // 0.5 · 2 · (-127 · 127 - 5)
  for (Isa isa : test::all_isas()) {
    if (!test::activate_isa(isa)) continue;
    float z[2] = {NAN, NAN};
    ThreadPool pool(2);
    matmul(z, x, 1, w, pool);
    EXPECT_EQ(z[0], 26.0f) << isa_name(isa);
    EXPECT_EQ(z[1], -16134.0f) << isa_name(isa);
  }
}

TEST_F(QuantizedMatmul, Int4HandComputed) {
  // codes of columns 0..7: -8..-1; 8..15: 0..7; 16..23: 0; 24: 7; 25..31: -8
  const uint32_t words[] = {0x76543210u, 0xfedcba98u, 0x88888888u, 0x0000000fu};
  const uint16_t scales[] = {f32_to_bf16(0.25f)};
  WeightMatrix w{words, DType::I32, 1, 32};
  w.format = WeightFormat::Int4Group;
  w.group = 32;
  w.scales = scales;
  w.scale_dtype = DType::BF16;
  float row[32];
  dequantize_row(w, 0, row);
  EXPECT_EQ(row[0], -2.0f);
  EXPECT_EQ(row[7], -0.25f);
  EXPECT_EQ(row[9], 0.25f);
  EXPECT_EQ(row[15], 1.75f);
  EXPECT_EQ(row[20], 0.0f);
  EXPECT_EQ(row[24], 1.75f);
  EXPECT_EQ(row[31], -2.0f);
  std::vector<float> x(32, 0.0f);  // absmax 127: activation scale 1, codes = x
  x[0] = 127.0f, x[9] = 2.0f, x[24] = -3.0f, x[31] = 1.0f;
  QuantizedActivations q;
  q.quantize(x.data(), 32, 1, 32);
  EXPECT_EQ(q.scales[0], 1.0f);
  EXPECT_EQ(q.sums[0], 127);
  float y = NAN;
  detail::matmul_rows_int_portable(&y, q, w, 0, 1);
  EXPECT_EQ(y, -260.75f);  // 0.25 · (127 · -8 + 2 · 1 - 3 · 7 + 1 · -8) = 0.25 · -1043
  for (Isa isa : test::all_isas()) {
    if (!test::activate_isa(isa)) continue;
    float z = NAN;
    ThreadPool pool(1);
    matmul(&z, x.data(), 1, w, pool);
    EXPECT_EQ(z, -260.75f) << isa_name(isa);
  }
}

// A block whose absmax is so small that 127 / absmax overflows to inf is quantized by dividing first (x · inf would
// make 0 · inf NaN codes), on every path.
TEST_F(QuantizedMatmul, TinyBlockQuantizesByDivision) {
  std::vector<float> x(40, 0.0f);
  x[0] = 1e-38f;
  x[1] = -2 * std::numeric_limits<float>::denorm_min();
  x[2] = -0.5e-38f;
  x[35] = 3.0f;  // a normal second block
  for (Isa isa : test::all_isas()) {
    if (!test::activate_isa(isa)) continue;
    QuantizedActivations q;
    q.quantize(x.data(), 40, 1, 40);
    EXPECT_EQ(q.codes[0], 127) << isa_name(isa);
    EXPECT_EQ(q.codes[1], 0) << isa_name(isa);
    EXPECT_EQ(q.codes[2], -64) << isa_name(isa);  // -0.5 · 127 = -63.5, to even
    EXPECT_EQ(q.sums[0], 63) << isa_name(isa);
    EXPECT_EQ(q.scales[0], 1e-38f / 127.0f) << isa_name(isa);
    EXPECT_EQ(q.codes[35], 127) << isa_name(isa);
    EXPECT_EQ(q.scales[1], 3.0f / 127.0f) << isa_name(isa);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The VNNI kernel against the portable one and against the fp32 meaning of the codes.

struct Case {
  WeightFormat format;
  int64_t group;  // int4
  DType scale_dtype;
};

std::string case_name(const Case& c) {
  std::string s = c.format == WeightFormat::Int8Channel ? "Int8" : "Int4G" + std::to_string(c.group);
  return s + (c.scale_dtype == DType::BF16 ? "Bf16Scales" : c.scale_dtype == DType::F16 ? "F16Scales" : "F32Scales");
}
void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

class VnniMatmul : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!have_vnni()) GTEST_SKIP() << "this CPU lacks AVX-512 VNNI";
  }
  Quantized make(int64_t N, int64_t K, std::mt19937& rng) {
    const Case& c = GetParam();
    Quantized q = c.format == WeightFormat::Int8Channel ? random_int8(N, K, c.scale_dtype, rng)
                                                        : random_int4(N, K, c.group, c.scale_dtype, rng);
    store_.pack(q.w);  // the layout the kernel reads (kernels/int_panels.h)
    EXPECT_NE(q.w.panels, nullptr);
    return q;
  }
  // The kernel under test on output rows [n0, n1) (n0 a multiple of 16, as matmul() splits them).
  static void kernel(float* y, const QuantizedActivations& q, const WeightMatrix& w, int64_t n0, int64_t n1) {
    detail::matmul_rows_int_avx512vnni_panels(y, q, w, n0, n1);
  }
  PanelStore store_;
  std::vector<std::pair<int64_t, int64_t>> shapes() const {  // N, K; int4 widths are multiples of the group
    if (GetParam().format == WeightFormat::Int8Channel)
      return {{1, 16}, {7, 33}, {33, 64}, {37, 100}, {50, 257}, {70, 1000}};
    const int64_t g = GetParam().group;
    return {{1, g}, {7, 2 * g}, {33, 3 * g}, {50, 5 * g}, {70, 640}};
  }
};

// Σ_b |xs · ws · dot| of y[m, n] in double: the scale of the fp32 rounding of the block sum.
double magnitude(const QuantizedActivations& q, const WeightMatrix& w, const float* wrow, int64_t m, int64_t n) {
  const int64_t blocks = q.kp / kActivationBlock;
  double total = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const double ws = weight_block_scale(w, n, b);
    double dot = 0;  // Σ xq · wq, the codes recovered from the dequantized row
    for (int64_t k = b * kActivationBlock; k < std::min(w.cols, (b + 1) * kActivationBlock); ++k)
      dot += q.codes[static_cast<size_t>(m * q.kp + k)] * std::round(wrow[static_cast<size_t>(k)] / ws);
    total += std::fabs(q.scales[static_cast<size_t>(m * blocks + b)] * ws * dot);
  }
  return total;
}

TEST_P(VnniMatmul, MatchesPortableAndFp32Meaning) {
  std::mt19937 rng(7);
  for (auto [N, K] : shapes()) {
    Quantized qw = make(N, K, rng);
    const WeightMatrix& w = qw.w;
    std::vector<float> wrows(static_cast<size_t>(N * K));
    for (int64_t n = 0; n < N; ++n) dequantize_row(w, n, wrows.data() + n * K);
    for (int64_t M : {1, 2, 3, 5, 6, 7, 13, 33, 64}) {
      const std::vector<float> x = random_activations(M, K, rng);
      QuantizedActivations q;
      q.quantize(x.data(), K, M, K);
      std::vector<float> got(static_cast<size_t>(M * N), NAN), portable(got.size(), NAN), fp32(got.size(), NAN);
      kernel(got.data(), q, w, 0, N);
      detail::matmul_rows_int_portable(portable.data(), q, w, 0, N);
      matmul_reference(fp32.data(), x.data(), M, w);
      const int64_t blocks = q.kp / kActivationBlock;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          const size_t i = static_cast<size_t>(m * N + n);
          const float* wrow = wrows.data() + n * K;
          // Both kernels sum the same exact block terms in the same order; they differ only in rounding (portable:
          // xs·ws, ·dot, +; VNNI: xs·ws, then one fma), each within (blocks + 2) ulp-sized steps of Σ|terms|.
          const double bound_int = 2.0 * (blocks + 2) * FLT_EPSILON * magnitude(q, w, wrow, m, n) + 1e-30;
          ASSERT_LE(std::fabs(got[i] - portable[i]), bound_int)
              << "M=" << M << " N=" << N << " K=" << K << " m=" << m << " n=" << n;
          // Against x · Wᵀ in fp32: each activation is off by at most half its block's step (xs / 2), plus the
          // reference's own fp32 sum over K terms.
          double quant = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double xs = q.scales[static_cast<size_t>(m * blocks + k / kActivationBlock)];
            quant += 0.5 * xs * std::fabs(wrow[k]) * (1 + 1e-4);  // 1e-4: the roundings of xs and x · 127 / absmax
            mag += std::fabs(static_cast<double>(x[static_cast<size_t>(m * K + k)]) * wrow[k]);
          }
          const double bound_fp32 = quant + bound_int + (K + 2) * FLT_EPSILON * mag;
          ASSERT_LE(std::fabs(got[i] - fp32[i]), bound_fp32) << "M=" << M << " N=" << N << " K=" << K;
        }
    }
  }
}

// A row's result is the same bits alone, in any batch of 2..33 rows at any place, and for any split of the output
// rows at a panel boundary (threads take blocks of 48 rows, three panels of 16).
TEST_P(VnniMatmul, RowsBitIdenticalWhateverBatchAndSplit) {
  std::mt19937 rng(11);
  const auto [N, K] = shapes().back();
  Quantized qw = make(N, K, rng);
  const std::vector<float> x = random_activations(40, K, rng);
  auto run = [&](const float* rows, int64_t M, int64_t n0, int64_t n1, std::vector<float>& y) {
    QuantizedActivations q;
    q.quantize(rows, K, M, K);
    y.assign(static_cast<size_t>(M * N), NAN);
    kernel(y.data(), q, qw.w, n0, n1);
  };
  std::vector<std::vector<float>> alone(40);
  for (int64_t m = 0; m < 40; ++m) run(x.data() + m * K, 1, 0, N, alone[static_cast<size_t>(m)]);
  std::vector<float> y;
  for (int64_t M = 2; M <= 33; ++M)
    for (int64_t first : {int64_t{0}, 40 - M, (40 - M) / 2}) {
      run(x.data() + first * K, M, 0, N, y);
      for (int64_t m = 0; m < M; ++m)
        ASSERT_EQ(0, std::memcmp(y.data() + m * N, alone[static_cast<size_t>(first + m)].data(), N * sizeof(float)))
            << "row " << first + m << " at " << m << " of a batch of " << M;
    }
  for (int64_t M : {1, 7}) {  // split [0, N) in two at every point: each part alone gives the same bits
    std::vector<float> whole;
    run(x.data(), M, 0, N, whole);
    for (int64_t split = 16; split < N; split += 16) {
      QuantizedActivations q;
      q.quantize(x.data(), K, M, K);
      y.assign(whole.size(), NAN);
      kernel(y.data(), q, qw.w, split, N);
      kernel(y.data(), q, qw.w, 0, split);
      ASSERT_EQ(0, std::memcmp(y.data(), whole.data(), whole.size() * sizeof(float))) << "split at " << split;
    }
  }
  ThreadPool pool(3);  // matmul() itself, its blocks of 48 rows over 3 threads, against one row alone
  std::vector<float> batch(static_cast<size_t>(17 * N)), single(static_cast<size_t>(N));
  matmul(batch.data(), x.data(), 17, qw.w, pool);
  for (int64_t m = 0; m < 17; ++m) {
    matmul(single.data(), x.data() + m * K, 1, qw.w, pool);
    ASSERT_EQ(0, std::memcmp(single.data(), batch.data() + m * N, N * sizeof(float))) << "row " << m;
  }
}

// The kernel prefetches up to 2 KB ahead in each panel; neither that nor a load may touch a byte past the panels:
// panels that end right before an inaccessible page give the same bits as a copy elsewhere (decode and a batch).
TEST_P(VnniMatmul, ReadsNothingPastTheWeights) {
  std::mt19937 rng(13);
  const auto [N, K] = shapes().back();
  Quantized qw = make(N, K, rng);
  const size_t bytes = static_cast<size_t>(int_panel_bytes(qw.w)), page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (bytes + page - 1) / page * page + page;  // the weights, then one guard page
  void* region = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(region, MAP_FAILED);
  auto* guard = static_cast<std::byte*>(region) + mapped - page;
  ASSERT_EQ(0, mprotect(guard, page, PROT_NONE));
  std::memcpy(guard - bytes, qw.w.panels, bytes);
  WeightMatrix at_edge = qw.w;
  at_edge.panels = guard - bytes;
  for (int64_t M : {1, 8}) {
    const std::vector<float> x = random_activations(M, K, rng);
    QuantizedActivations q;
    q.quantize(x.data(), K, M, K);
    std::vector<float> want(static_cast<size_t>(M * N), NAN), got(want.size(), NAN);
    kernel(want.data(), q, qw.w, 0, N);
    kernel(got.data(), q, at_edge, 0, N);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "M=" << M;
  }
  munmap(region, mapped);
}

// matmul() takes the VNNI kernel on AVX-512 for weights in panels, and the portable one below AVX-512 or for weights
// without panels (a matrix made outside a model's load).
TEST_P(VnniMatmul, DispatchFollowsActiveIsa) {
  std::mt19937 rng(3);
  const auto [N, K] = shapes()[3];
  Quantized qw = make(N, K, rng);
  const std::vector<float> x = random_activations(5, K, rng);
  QuantizedActivations q;
  q.quantize(x.data(), K, 5, K);
  std::vector<float> vnni(static_cast<size_t>(5 * N)), portable(vnni.size()), got(vnni.size());
  kernel(vnni.data(), q, qw.w, 0, N);
  detail::matmul_rows_int_portable(portable.data(), q, qw.w, 0, N);
  ThreadPool pool(2);
  WeightMatrix rows_only = qw.w;
  rows_only.panels = nullptr;
  ASSERT_NE(0, std::memcmp(vnni.data(), portable.data(), vnni.size() * sizeof(float)));  // the two are told apart
  for (Isa isa : test::all_isas()) {
    if (!test::activate_isa(isa)) continue;
    matmul(got.data(), x.data(), 5, qw.w, pool);
    const std::vector<float>& want = isa == Isa::Avx512 || isa == Isa::Avx512Bf16 ? vnni : portable;
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << isa_name(isa);
    matmul(got.data(), x.data(), 5, rows_only, pool);
    EXPECT_EQ(0, std::memcmp(got.data(), portable.data(), got.size() * sizeof(float)))
        << isa_name(isa) << ", no panels";
  }
  set_active_isa(Isa::Avx512Bf16);
}

// A batch of no rows writes nothing and returns (the tiles assume at least one row).
TEST_P(VnniMatmul, EmptyBatchWritesNothing) {
  std::mt19937 rng(17);
  const auto [N, K] = shapes().back();
  Quantized qw = make(N, K, rng);
  ThreadPool pool(2);
  float y = 7.0f;
  const float x = 1.0f;
  matmul(&y, &x, 0, qw.w, pool);
  EXPECT_EQ(y, 7.0f);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, VnniMatmul,
    ::testing::Values(Case{WeightFormat::Int8Channel, 0, DType::F32}, Case{WeightFormat::Int8Channel, 0, DType::BF16},
                      Case{WeightFormat::Int8Channel, 0, DType::F16}, Case{WeightFormat::Int4Group, 32, DType::BF16},
                      Case{WeightFormat::Int4Group, 32, DType::F16}, Case{WeightFormat::Int4Group, 32, DType::F32},
                      Case{WeightFormat::Int4Group, 64, DType::BF16}, Case{WeightFormat::Int4Group, 160, DType::BF16},
                      Case{WeightFormat::Int4Group, 128, DType::F32}),
    [](const auto& info) { return case_name(info.param); });

// NaN or inf in an activation row makes that row NaN, as with fp32 weights; the other rows are untouched.
TEST_F(QuantizedMatmul, NonFiniteActivationsGiveNan) {
  std::mt19937 rng(5);
  Quantized qw = random_int8(20, 100, DType::BF16, rng);
  std::vector<float> x = random_activations(3, 100, rng);
  x[100 + 40] = NAN;
  x[200 + 99] = INFINITY;
  WeightMatrix packed = qw.w;  // in panels where the VNNI kernel is active
  PanelStore store;
  store.pack(packed);
  for (Isa isa : test::all_isas())
    for (const WeightMatrix& w : {qw.w, packed}) {
      if (!test::activate_isa(isa)) continue;
      std::vector<float> y(60, 0.0f);
      ThreadPool pool(2);
      matmul(y.data(), x.data(), 3, w, pool);
      for (int64_t n = 0; n < 20; ++n) {
        EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(n)])) << isa_name(isa);
        EXPECT_TRUE(std::isnan(y[static_cast<size_t>(20 + n)])) << isa_name(isa);
        EXPECT_TRUE(std::isnan(y[static_cast<size_t>(40 + n)])) << isa_name(isa);
      }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The AVX-512 activation quantization gives the plain version's codes, scales and sums bit for bit.

TEST_F(QuantizedMatmul, VectorQuantizeIsBitIdentical) {
  if (!cpu_features().avx512) GTEST_SKIP() << "this CPU lacks AVX-512";
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int64_t K : {1, 5, 31, 32, 33, 64, 100, 257, 2048}) {
    const int64_t M = 9;
    std::vector<float> x(static_cast<size_t>(M * K));
    for (float& v : x) v = std::ldexp(dist(rng), exponent(rng) / 10);  // varied magnitudes, many halfway-close codes
    for (int64_t k = 0; k < K; ++k)  // absmax 127 in every block: x · 127 / absmax = x, halfway between codes
      x[static_cast<size_t>(K + k)] = k % 32 == 0 ? 127.0f : static_cast<float>(k % 50 - 25) + 0.5f;
    std::fill_n(x.begin() + 2 * K, std::min<int64_t>(K, 40), 0.0f);  // zero blocks
    x[static_cast<size_t>(3 * K + K / 2)] = NAN;
    x[static_cast<size_t>(4 * K)] = -INFINITY;
    x[static_cast<size_t>(5 * K + K - 1)] = std::numeric_limits<float>::denorm_min();
    x[static_cast<size_t>(6 * K)] = FLT_MAX;
    std::fill_n(x.begin() + 7 * K, std::min<int64_t>(K, 32), 0.0f);  // a block of tiny values: 127 / absmax is inf
    x[static_cast<size_t>(7 * K)] = 1e-38f,
                              x[static_cast<size_t>(7 * K + K / 3)] = -2 * std::numeric_limits<float>::denorm_min();
    QuantizedActivations plain, vector;
    ASSERT_TRUE(test::activate_isa(Isa::Avx2) || test::activate_isa(Isa::Scalar));
    plain.quantize(x.data(), K, M, K);
    ASSERT_TRUE(test::activate_isa(Isa::Avx512));
    vector.quantize(x.data(), K, M, K);
    ASSERT_EQ(plain.kp, vector.kp);
    EXPECT_EQ(plain.codes, vector.codes) << "K=" << K;
    EXPECT_EQ(plain.sums, vector.sums) << "K=" << K;
    ASSERT_EQ(plain.scales.size(), vector.scales.size());
    for (size_t i = 0; i < plain.scales.size(); ++i)
      EXPECT_EQ(0, std::memcmp(&plain.scales[i], &vector.scales[i], sizeof(float))) << "K=" << K << " scale " << i;
    EXPECT_TRUE(std::isnan(vector.scales[static_cast<size_t>(3 * vector.kp / 32 + K / 2 / 32)]));
  }
}

}  // namespace
}  // namespace eaglet
