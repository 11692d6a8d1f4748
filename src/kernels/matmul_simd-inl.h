// Register-tiled matmul body shared by the AVX2 and AVX-512 translation units. Each includes this file after
// selecting its target ISA and defining a traits struct S with: V, kLanes, zero(), loadu(const float*),
// load_bf16(const void*), load_f16(const void*), fma(a, b, acc), sum(V).
// A tile is MR activation rows x NR weight rows; weights are widened to fp32 once per tile and per k-step.
// Tails (K or N not a multiple of the vector width) go through zero-padded partial vectors, so element k always
// lands in lane k % kLanes and is accumulated with the same FMA: a result never depends on the sizes around it
// (attention over a longer cache with zero probabilities, or a batch of rows, gives the same bits).
namespace eaglet::detail {

// n < kLanes elements from p, zero padded, as a vector of fp32.
template <class S>
inline typename S::V partial_f32(const float* p, int64_t n) {
  alignas(64) float buf[16] = {};
  std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(float));
  return S::loadu(buf);
}

template <class S, DType kType>
inline typename S::V partial_weights(const std::byte* row, int64_t k, int64_t n) {
  if constexpr (kType == DType::F32) {
    return partial_f32<S>(reinterpret_cast<const float*>(row) + k, n);
  } else {
    alignas(64) uint16_t buf[32] = {};
    std::memcpy(buf, row + 2 * k, static_cast<size_t>(n) * 2);
    return kType == DType::BF16 ? S::load_bf16(buf) : S::load_f16(buf);
  }
}

template <class S, DType kType>
inline typename S::V load_weights(const std::byte* row, int64_t k) {
  if constexpr (kType == DType::F32)
    return S::loadu(reinterpret_cast<const float*>(row) + k);
  else if constexpr (kType == DType::BF16)
    return S::load_bf16(row + 2 * k);
  else
    return S::load_f16(row + 2 * k);
}

constexpr int kTileWeightRows = 4;
constexpr int64_t kPrefetchBytes = 1024;

// Every 64 bytes of a weight row, the line 1 KB further on in the same row or, past its end, in the same row of the
// next tile (rows n + 4.., if below n1; kernels/prefetch-inl.h).
template <DType kType, int NR>
[[gnu::always_inline]] inline void prefetch_ahead(const std::byte* w, size_t row_bytes, int64_t K, int64_t n,
                                                  int64_t n1, int64_t k) {
  constexpr int64_t kSize = kType == DType::F32 ? 4 : 2;
  if ((k * kSize) % 64 != 0) return;
  const bool next = n + kTileWeightRows < n1;
  const WeightStreams streams{w + n * row_bytes, row_bytes, K * kSize,
                              next ? w + (n + kTileWeightRows) * row_bytes : nullptr,
                              next ? static_cast<int>(n1 - n - kTileWeightRows) : 0};
  prefetch_streams<NR>(streams, k * kSize + kPrefetchBytes);
}

template <class S, DType kType, int MR, int NR>
void tile(float* y, const float* x, int64_t ldx, int64_t K, int64_t N, int64_t ld, const std::byte* w, int64_t m,
          int64_t n, int64_t n1) {
  using V = typename S::V;
  const size_t row_bytes = static_cast<size_t>(ld) * dtype_size(kType);
  V acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = S::zero();
  const int64_t kv = K / S::kLanes * S::kLanes;
  for (int64_t k = 0; k < kv; k += S::kLanes) {
    prefetch_ahead<kType, NR>(w, row_bytes, K, n, n1, k);
    V wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = load_weights<S, kType>(w + (n + j) * row_bytes, k);
    for (int i = 0; i < MR; ++i) {
      const V xv = S::loadu(x + (m + i) * ldx + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = S::fma(xv, wv[j], acc[i][j]);
    }
  }
  if (kv < K) {
    const int64_t rest = K - kv;
    V wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = partial_weights<S, kType>(w + (n + j) * row_bytes, kv, rest);
    for (int i = 0; i < MR; ++i) {
      const V xv = partial_f32<S>(x + (m + i) * ldx + kv, rest);
      for (int j = 0; j < NR; ++j) acc[i][j] = S::fma(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[(m + i) * N + n + j] = S::sum(acc[i][j]);
}

template <class S, DType kType, int MR>
void tile_rows(float* y, const float* x, int64_t ldx, int64_t K, int64_t N, int64_t ld, const std::byte* w, int64_t m,
               int64_t n, int64_t n1) {
  switch (std::min<int64_t>(n1 - n, kTileWeightRows)) {
    case 4: tile<S, kType, MR, 4>(y, x, ldx, K, N, ld, w, m, n, n1); break;
    case 3: tile<S, kType, MR, 3>(y, x, ldx, K, N, ld, w, m, n, n1); break;
    case 2: tile<S, kType, MR, 2>(y, x, ldx, K, N, ld, w, m, n, n1); break;
    default: tile<S, kType, MR, 1>(y, x, ldx, K, N, ld, w, m, n, n1); break;
  }
}

template <class S, DType kType>
void matmul_rows_typed(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w, int64_t n0,
                       int64_t n1) {
  const auto* base = static_cast<const std::byte*>(w.data);
  const int64_t K = w.cols, N = w.rows, ld = w.row_stride();
  for (int64_t n = n0; n < n1; n += kTileWeightRows) {
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) tile_rows<S, kType, 4>(y, x, ldx, K, N, ld, base, m, n, n1);
    switch (M - m) {
      case 3: tile_rows<S, kType, 3>(y, x, ldx, K, N, ld, base, m, n, n1); break;
      case 2: tile_rows<S, kType, 2>(y, x, ldx, K, N, ld, base, m, n, n1); break;
      case 1: tile_rows<S, kType, 1>(y, x, ldx, K, N, ld, base, m, n, n1); break;
      default: break;
    }
  }
}

template <class S>
void matmul_rows_simd(float* y, const float* x, int64_t ldx, int64_t M, const WeightMatrix& w, int64_t n0, int64_t n1) {
  switch (w.dtype) {
    case DType::BF16: matmul_rows_typed<S, DType::BF16>(y, x, ldx, M, w, n0, n1); break;
    case DType::F16: matmul_rows_typed<S, DType::F16>(y, x, ldx, M, w, n0, n1); break;
    case DType::F32: matmul_rows_typed<S, DType::F32>(y, x, ldx, M, w, n0, n1); break;
    default: matmul_rows_scalar(y, x, ldx, M, w, n0, n1); break;
  }
}

// y[M, N] = x[M, K] · B[K, N] (B row-major with row stride ldb, fp32 or bf16 widened in registers): vectorised along
// N with broadcasts of x, so no horizontal sums (attention scores against keys stored transposed). Tiles of 4 rows x
// 4 vectors.
template <class S>
inline typename S::V load_b(const float* p) {
  return S::loadu(p);
}
template <class S>
inline typename S::V load_b(const uint16_t* p) {
  return S::load_bf16(p);
}
template <class S, class T>
inline typename S::V partial_b(const T* p, int64_t n) {
  alignas(64) T buf[16] = {};
  std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(T));
  return load_b<S>(static_cast<const T*>(buf));
}

template <class S, int MR, int NV, class T>
void gemm_nn_tile(float* y, const float* x, int64_t K, int64_t ldy, const T* b, int64_t ldb, int64_t m, int64_t n) {
  using V = typename S::V;
  V acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = S::zero();
  for (int64_t k = 0; k < K; ++k) {
    V bv[NV];
    for (int j = 0; j < NV; ++j) bv[j] = load_b<S>(b + k * ldb + n + j * S::kLanes);
    for (int i = 0; i < MR; ++i) {
      const V xv = S::set1(x[(m + i) * K + k]);
      for (int j = 0; j < NV; ++j) acc[i][j] = S::fma(xv, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) S::storeu(y + (m + i) * ldy + n + j * S::kLanes, acc[i][j]);
}

template <class S, int MR, class T>
void gemm_nn_rows(float* y, const float* x, int64_t K, int64_t N, int64_t ldy, const T* b, int64_t ldb, int64_t m) {
  constexpr int64_t L = S::kLanes;
  int64_t n = 0;
  for (; n + 4 * L <= N; n += 4 * L) gemm_nn_tile<S, MR, 4>(y, x, K, ldy, b, ldb, m, n);
  for (; n + L <= N; n += L) gemm_nn_tile<S, MR, 1>(y, x, K, ldy, b, ldb, m, n);
  if (n < N) {  // the last columns, as a zero-padded vector
    const int64_t rest = N - n;
    using V = typename S::V;
    V acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = S::zero();
    for (int64_t k = 0; k < K; ++k) {
      const V bv = partial_b<S>(b + k * ldb + n, rest);
      for (int i = 0; i < MR; ++i) acc[i] = S::fma(S::set1(x[(m + i) * K + k]), bv, acc[i]);
    }
    for (int i = 0; i < MR; ++i) {
      alignas(64) float out[16];
      S::storeu(out, acc[i]);
      std::memcpy(y + (m + i) * ldy + n, out, static_cast<size_t>(rest) * sizeof(float));
    }
  }
}

template <class S, class T>
void gemm_nn_simd(float* y, const float* x, int64_t M, const T* b, int64_t K, int64_t N, int64_t ldb, int64_t ldy) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) gemm_nn_rows<S, 4>(y, x, K, N, ldy, b, ldb, m);
  for (; m < M; ++m) gemm_nn_rows<S, 1>(y, x, K, N, ldy, b, ldb, m);
}

}  // namespace eaglet::detail
