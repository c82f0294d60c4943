#include "cpu_ops/small_gemm.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ot::cpu {

namespace {

constexpr int64_t kMaxMN = 64, kMaxK = 256, kTileN = 16, kTileM = 4;

// One matrix: where op(A)'s element (i, k) is (a[i * rs + k * ks]) and B's panel (op(B)'s row k at b + k * ldb,
// zero-padded to a multiple of 16 columns).
struct Operands {
  const float* a;
  int64_t rs, ks;
  const float* b;
  int64_t ldb;
};

// Writes rows [i, i + rows) x columns [j, j + cols) of C from the tile t (rows x 16, row-major): alpha, then C's
// prior value added when accumulating.
void StoreTile(const float* t, int64_t rows, int64_t cols, float* c, int64_t ldc, float alpha, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      float v = t[r * kTileN + j];
      if (alpha != 1.0f) v *= alpha;
      c[r * ldc + j] = accumulate ? c[r * ldc + j] + v : v;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
// R rows x 16 columns of C at c (row stride ldc), of which the first `cols` are C's: R x 2 accumulators in
// registers, one broadcast of A and two loads of B per k; a partial tile goes through the scratch tile t.
template <int R>
__attribute__((target("avx2,fma"))) void Tile(const Operands& o, int64_t i, int64_t j, int64_t k, float* t, float* c,
                                              int64_t ldc, int64_t cols, float alpha, bool accumulate) {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const float* a = o.a + i * o.rs;
  const float* b = o.b + j;
  for (int64_t kk = 0; kk < k; ++kk) {
    const __m256 b0 = _mm256_loadu_ps(b + kk * o.ldb), b1 = _mm256_loadu_ps(b + kk * o.ldb + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * o.rs + kk * o.ks);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  if (cols == kTileN) {
    // A full tile goes straight to C with StoreTile's operations in vector form (the same roundings: times alpha,
    // then C's prior value added), no round trip through t.
    const __m256 al = _mm256_set1_ps(alpha);
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h) {
        float* cp = c + r * ldc + 8 * h;
        __m256 v = acc[r][h];
        if (alpha != 1.0f) v = _mm256_mul_ps(v, al);
        if (accumulate) v = _mm256_add_ps(_mm256_loadu_ps(cp), v);
        _mm256_storeu_ps(cp, v);
      }
    return;
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(t + r * kTileN, acc[r][0]);
    _mm256_storeu_ps(t + r * kTileN + 8, acc[r][1]);
  }
  StoreTile(t, R, cols, c, ldc, alpha, accumulate);
}

__attribute__((target("avx2,fma"))) void Matrix(const Operands& o, int64_t m, int64_t k, int64_t n, float* c,
                                                float alpha, bool accumulate) {
  alignas(32) float t[kTileM * kTileN];
  for (int64_t i = 0; i < m; i += kTileM) {
    const int64_t rows = std::min(kTileM, m - i);
    for (int64_t j = 0; j < n; j += kTileN) {
      float* ct = c + i * n + j;
      const int64_t cols = std::min(kTileN, n - j);
      switch (rows) {
        case 4:
          Tile<4>(o, i, j, k, t, ct, n, cols, alpha, accumulate);
          break;
        case 3:
          Tile<3>(o, i, j, k, t, ct, n, cols, alpha, accumulate);
          break;
        case 2:
          Tile<2>(o, i, j, k, t, ct, n, cols, alpha, accumulate);
          break;
        default:
          Tile<1>(o, i, j, k, t, ct, n, cols, alpha, accumulate);
          break;
      }
    }
  }
}

bool HasAvx2Fma() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}
#else
bool HasAvx2Fma() { return false; }
void Matrix(const Operands&, int64_t, int64_t, int64_t, float*, float, bool) {}
#endif

}  // namespace

bool SmallGemmApplies(const MatMulSpec& s) {
  return s.type == DnnType::kF32 && !s.a_batch.empty() && s.a_batch.size() == s.b_batch.size() && s.m > 0 && s.n > 0 &&
         s.k > 0 && s.m <= kMaxMN && s.n <= kMaxMN && s.k <= kMaxK;
}

void SmallBatchedGemm(const MatMulSpec& spec, const float* a, const float* b, float* c) {
  if (!HasAvx2Fma()) {  // plain loops (float64 accumulation) on machines without AVX2 + FMA
    NaiveMatMul<float, double>(spec, a, b, c);
    return;
  }
  const MatMulBatch batch(spec);
  const int64_t batches = batch.count();
  const int64_t M = spec.m, N = spec.n, K = spec.k;
  if (batches == 0) return;
  const int64_t a_rs = spec.trans_a ? 1 : K, a_ks = spec.trans_a ? M : 1;
  const int64_t width = (N + kTileN - 1) / kTileN * kTileN;
  const bool pack = spec.trans_b || width != N;  // else op(B)'s rows are read in place
  const int64_t grain = std::max<int64_t>(1, 16384 / (M * N * K));
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, batches, grain), [&](const tbb::blocked_range<int64_t>& r) {
    alignas(32) float panel[kMaxK * kMaxMN];  // 64 KiB on the task's stack: no heap allocation during a step
    for (int64_t bi = r.begin(); bi < r.end(); ++bi) {
      int64_t ao = 0, bo = 0;
      batch.Offsets(bi, &ao, &bo);
      const float* bm = b + bo;
      Operands o{a + ao, a_rs, a_ks, bm, N};
      if (pack) {
        for (int64_t kk = 0; kk < K; ++kk) {
          float* row = panel + kk * width;
          for (int64_t j = 0; j < N; ++j) row[j] = spec.trans_b ? bm[j * K + kk] : bm[kk * N + j];
          for (int64_t j = N; j < width; ++j) row[j] = 0.0f;
        }
        o.b = panel;
        o.ldb = width;
      }
      Matrix(o, M, K, N, c + bi * M * N, spec.alpha, spec.accumulate);
    }
  });
}

}  // namespace ot::cpu
