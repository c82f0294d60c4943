// GEMM on the GPU with cuBLASLt: fp32 (exact or TF32), fp16 and bf16 inputs/outputs, fp32 accumulation, row-major
// operands, strided batches (stride 0 broadcasts A or B), beta accumulation into D, and cuBLASLt's fused epilogues
// (bias, ReLU, GELU, bias gradient). Plain host C++ over device pointers; no IR types.
//
// Row-major mapping. A row-major D[m,n] = op(A)[m,k] op(B)[k,n] is, read as column-major, Dᵀ[n,m] =
// op(B)ᵀ[n,k] op(A)ᵀ[k,m]. So cuBLASLt is called with the operands swapped (our B is its A, our A is its B), m and n
// swapped, and every row-major leading dimension used as a column-major one. No data moves.
//
// Epilogues (all applied in fp32 before the one rounding to the output type; beta·C is added before them):
//   kBias      D = alpha·op(A)op(B) + beta·C + bias[j]           bias: n elements of the output type (per column j,
//                                                                i.e. per output feature); cuBLASLt's per-row bias
//                                                                of the column-major Dᵀ (CUBLASLT_EPILOGUE_BIAS)
//   kRelu      D = max(x, 0)                                     x = alpha·op(A)op(B) + beta·C
//   kBiasRelu  D = max(x + bias[j], 0)
//   kGelu      D = gelu(x), the tanh form cuBLASLt computes:     gelu(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715
//   v³)))
//              (kernel_common/scalar_math.h GeluTanh; NOT the erf form of ONNX Gelu's default approximate="none")
//   kBiasGelu  D = gelu(x + bias[j])
//   kBiasGrad  D = alpha·op(A)op(B) + beta·C, and bias_grad[j] = Σ_{p<k} op(B)[p, j] for j < n (n elements of the
//              output type, overwritten, not accumulated): the column sums of op(B) over the reduction dimension.
//              This is the Linear layer's weight-gradient GEMM for a weight stored [in, out] (ONNX MatMul layout):
//                dW[in,out] = Xᵀ·dY  →  A = X [rows, in] with trans_a = true, B = dY [rows, out], m = in, n = out,
//                k = rows;  bias_grad = db[out] = Σ_rows dY.
//              (cuBLASLt: CUBLASLT_EPILOGUE_BGRADA on its A, which is our B.)
//   kBiasGradA D as kBiasGrad, and bias_grad[i] = Σ_{p<k} op(A)[i, p] for i < m: the row sums of op(A) over the
//              reduction dimension. The weight-gradient GEMM for a weight stored [out, in] (ONNX Gemm transB=1,
//              PyTorch's Linear):  dW[out,in] = dYᵀ·X → A = dY [rows, out] with trans_a = true, B = X [rows, in],
//              m = out, n = in, k = rows; bias_grad = db[out]. (cuBLASLt: CUBLASLT_EPILOGUE_BGRADB on its B.)
// The bias-gradient epilogues need batch == 1, and cuBLASLt (13.x, checked on an H100 for f32, TF32, f16 and bf16)
// offers them only in the layouts above: kBiasGrad with trans_b == false (either trans_a), kBiasGradA with
// trans_a == true (either trans_b). Other epilogue/type/transpose combinations it lacks, here or in another version:
// when its heuristic returns no algorithm, Run throws std::runtime_error naming the desc ("no algorithm"), so the
// caller can fall back to a plain GEMM plus its own reduction/element kernel. The bias and activation epilogues ran
// for every type and transpose combination tested. Not offered here: the *_AUX epilogues (ReLU mask / GELU input
// saved for backward) and DRELU/DGELU.
//
// Determinism. With `deterministic`, the heuristic is asked only for algorithms with no split-K reduction
// (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = NONE) and each returned algorithm's reduction scheme is checked, so
// every output element is one dot product in one fixed order. This is conservative: cuBLASLt documents its split-K
// reductions as ordered (INPLACE serializes through counters, COMPUTE_TYPE/OUTPUT_TYPE reduce in a separate
// kernel), and on an H100 the default choice was bitwise repeatable over 20 runs for long-k shapes too. It is not
// free there: fp32 64x96x8192 0.017 -> 1.27 ms, 768x768x4096 0.11 -> 0.64 ms (a weight-gradient shape), because
// small m x n with long k has no parallelism left without split-K.
//
// Alignment: a, b and d as the caller's arena gives them (256 bytes), the bias (or bias gradient) 16 bytes. The
// alignment of each pointer (capped at 256) is part of the cache key and is handed to the heuristic as the minimum
// alignment, so an algorithm chosen for aligned pointers is never run on less aligned ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ot::cuda {

// Element type of A, B, C and D (C is D). Accumulation and scaling are fp32 always.
enum class GemmType { kF32, kF16, kBF16 };

enum class GemmEpilogue { kNone, kBias, kRelu, kBiasRelu, kGelu, kBiasGelu, kBiasGrad, kBiasGradA };

struct GemmDesc {
  GemmType type = GemmType::kF32;
  bool tf32 = false;  // kF32 only: allow TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32); false = CUBLAS_COMPUTE_32F
  bool trans_a = false, trans_b = false;
  // ROW-MAJOR: D[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C[m,n]. A is stored [m,k] (trans_a: [k,m]), B is
  // stored [k,n] (trans_b: [n,k]).
  int64_t m = 0, n = 0, k = 0;
  // Row-major leading dimensions (elements between rows) of A, B and D as stored; 0 = dense (the stored row length).
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t batch = 1;
  // Element strides between batch matrices. 0 for A or B broadcasts one matrix to every batch; 0 for D means dense
  // (m * ldd). Ignored when batch == 1.
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  float alpha = 1.f, beta = 0.f;  // beta != 0 reads C from the D buffer (accumulate into D)
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  bool deterministic = false;  // only algorithms without split-K reduction (see above)
};

std::string ToString(const GemmDesc& g);

// One per device/stream user; not thread-safe (Run sets the bias pointer on a cached descriptor). Owns the cuBLASLt
// handle (made on the device current at construction) and a cache from (every GemmDesc field, the workspace size
// and the pointers' alignments) to the chosen algorithm and its descriptor/layout objects, so a repeated Run on the
// same shape does no heuristic query.
class GemmRunner {
 public:
  GemmRunner();  // throws std::runtime_error with cuBLAS's status name on failure (no GPU:
                 // CUBLAS_STATUS_NOT_INITIALIZED)
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // The workspace the caller should hand to Run: 32 MiB. cuBLAS recommends 32 MiB on Hopper (4 MiB is enough
  // before it) so that the heuristic can pick its split-K and stream-K kernels, which keep partial tiles there;
  // with less, Run still works but only algorithms whose workspace fits are considered.
  static size_t WorkspaceBytes();

  // a, b: device pointers; d: device output (and C when beta != 0); bias: device vector of n elements for the bias
  // epilogues, else ignored; workspace: device memory of workspace_bytes (may be null with 0 bytes); stream: a
  // cudaStream_t; bias_grad: for kBiasGrad (n elements) / kBiasGradA (m elements), the device output.
  // Throws std::invalid_argument on a malformed desc or a missing pointer, std::runtime_error when cuBLASLt has no
  // algorithm for the desc or fails (the message names the desc and cuBLAS's status).
  void Run(const GemmDesc& g, const void* a, const void* b, void* d, const void* bias, void* workspace,
           size_t workspace_bytes, void* stream, void* bias_grad = nullptr);

  // Heuristic queries made so far (one per cache miss); for tests of the cache.
  int64_t HeuristicQueries() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ot::cuda
