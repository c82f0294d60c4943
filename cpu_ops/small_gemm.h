// Batched GEMM of many small float32 matrices (attention's per-head Q K^T and P V: 128 products of 32 x 16 x 32 in
// the tiny LM), where oneDNN 2.6's gemm:jit pays a per-matrix overhead and reaches ~30 GFLOP/s on one AVX2 core.
// An AVX2/FMA register-tiled kernel (4 rows x 16 columns of C per tile, A read in place through its row and k strides
// so a transposed A needs no copy, B copied into a zero-padded [K, 16j] panel only when transposed or of odd width),
// parallel over the batch with TBB; each C element is one k-ordered sum (deterministic). Machines without AVX2 and FMA
// run plain loops over the same contract.
#pragma once
#include <cstdint>

#include "cpu_ops/matmul.h"

namespace ot::cpu {

// True when spec is a batched (a_batch non-empty) float32 product whose matrices are small enough for
// SmallBatchedGemm: m, n <= 64 and k <= 256.
bool SmallGemmApplies(const MatMulSpec& spec);

// C = alpha op(A) op(B) (+ C when spec.accumulate) for every matrix of the broadcast batch; MatMulSpec's contract.
void SmallBatchedGemm(const MatMulSpec& spec, const float* a, const float* b, float* c);

}  // namespace ot::cpu
