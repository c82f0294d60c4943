// Row-wise CUDA kernels of a transformer training step (the GPU side of cpu_ops/norm, cpu_ops/softmax,
// cpu_ops/loss and cpu_ops/row_grad, which are the reference): LayerNorm forward/backward over the last axis,
// Softmax/LogSoftmax forward/backward, softmax cross-entropy forward and gradient, and a deterministic column sum.
//
// Plain launchers over raw device pointers; `stream` is a cudaStream_t (nullptr: the legacy default stream). Every
// launcher is asynchronous, checks its arguments on the host (std::invalid_argument) and the launch
// (cudaGetLastError; std::runtime_error), and needs no host synchronisation, so a step can be captured as a CUDA
// graph. Layout: rows of `cols` contiguous elements, row-major.
//
// Precision, as the CPU kernels: statistics and sums in double (fixed-order block trees: one block per row, each
// thread summing a fixed strided set of elements, then a shuffle-down tree; so the result depends only on the sizes,
// never on scheduling); float inputs' elementwise arithmetic in double where the CPU's float path uses double
// (LayerNorm, the backward passes), half inputs' (f16/bf16) in float where the CPU widens to float, every value
// rounded once when stored. e^x of a float is kernel_common/vec_math.h's VecExp (the CPU's function). Per-column
// sums over rows (dgamma/dbeta, ReduceRowsToColumns) are two-stage: per-chunk partials over a fixed partition of
// the rows (64 rows per chunk) into the caller's workspace, then the chunks added in order: no float atomics.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ot::cuda {

// Storage type of a floating-point buffer (also used by data_kernels.h and optimizer_kernels.h).
enum class FloatType : uint8_t { kF32, kF16, kBF16 };
// Index type of labels / gather indices.
enum class IndexType : uint8_t { kI32, kI64 };

size_t FloatTypeSize(FloatType t);  // 4 or 2

// Threads per block of the row kernels for rows of `cols` elements: about four elements per thread, a power of two
// in [32, 1024]. Depends only on cols (so do the reduction trees). Host-only.
int RowBlockThreads(int64_t cols);

// ---- LayerNorm over the last axis ---------------------------------------------------------------------------------
// y = (x - mean) * invstd * gamma + beta with mean and biased variance of each row in double, invstd =
// 1 / sqrt(var + eps). x, y: [rows, cols] of type `xt`; gamma, beta: [cols] of type `pt` (xt or kF32; beta may be
// null). mean / invstd: [rows] float32, may be null (each written as the float of the double statistic, as
// cpu::LayerNorm does). float x: y in double; half x: y in float from the float mean / invstd (cpu::LayerNorm's half
// path). y may alias x.
void LayerNormForward(int64_t rows, int64_t cols, FloatType xt, const void* x, FloatType pt, const void* gamma,
                      const void* beta, double eps, void* y, float* mean, float* invstd, void* stream);

// Workspace of LayerNormBackward (bytes; 256-byte aligned start expected, as cudaMalloc gives).
size_t LayerNormBackwardWorkspaceBytes(int64_t rows, int64_t cols);

// LayerNorm backward (cpu::LayerNormGradF32's formulas, in double): xhat = (x - mu) r, g = dy gamma,
//   dx = r (g - mean(g) - xhat mean(g xhat)),  dgamma[j] = sum over rows of dy xhat,  dbeta[j] = sum of dy.
// dy, x, dx: [rows, cols] of type xt; gamma [cols] of type pt. mean / invstd: the forward's saved float32
// statistics, or both null to recompute them from x (double, two passes, as the CPU does). dgamma / dbeta ([cols]
// of type pt) may each be null; they are written (=, not +=). dx may alias dy or x (the column sums run first, and
// each dx row is written after its sums). Deterministic: bit-identical on every run.
void LayerNormBackward(int64_t rows, int64_t cols, FloatType xt, const void* dy, const void* x, FloatType pt,
                       const void* gamma, const float* mean, const float* invstd, double eps, void* dx, void* dgamma,
                       void* dbeta, void* workspace, size_t workspace_bytes, void* stream);

// ---- Softmax / LogSoftmax over the last axis ------------------------------------------------------------------------
// cpu::Softmax's float path (half rows widened to float): m = max of the row (its non-NaN elements; an all -inf row
// uses 0), s = sum of VecExp(x - m) in double; Softmax y = VecExp(x - m) * float(1 / s), LogSoftmax
// y = (x - m) - float(log s). x, y: [rows, cols] of type t. y may alias x.
void SoftmaxForward(bool log, int64_t rows, int64_t cols, FloatType t, const void* x, void* y, void* stream);

// Backward from the forward's output y: Softmax dx = y (dy - sum(dy y)), LogSoftmax dx = dy - exp(y) sum(dy); sums
// and elementwise arithmetic in double (the executor's SoftmaxGrad and cpu::SoftmaxGradF32). dy, y, dx of type t;
// dx may alias dy or y.
void SoftmaxBackward(bool log, int64_t rows, int64_t cols, FloatType t, const void* dy, const void* y, void* dx,
                     void* stream);

// ---- Softmax cross-entropy over logits [n, c]
// -------------------------------------------------------------------------
enum class LossReduction : uint8_t { kNone, kSum, kMean };

// Workspace of SoftmaxCrossEntropyForward / Backward (bytes).
size_t SoftmaxCrossEntropyWorkspaceBytes(int64_t n);

// cpu::SoftmaxCrossEntropyLoss for 2-D logits (d = 1): log_prob = LogSoftmax(logits) (rounded to type t; written
// when not null), loss_i = -log_prob[i, t_i] * w[t_i] (w = 1 without weights; the stored, rounded log_prob is read,
// as the CPU's NllLoss does), 0 where t_i == ignore_index. Reduction none: loss has n elements; sum: loss[0] = sum;
// mean: loss[0] = sum / (sum of w[t_i] over the rows not ignored) (0/0 = NaN when every row is ignored, as on the
// CPU). Sums in double, a fixed tree. logits, weight ([c], may be null), loss, log_prob: type t. labels: int32 or
// int64. A label outside [0, c) that is not ignore_index sets *bad_label = 1 (when not null; never cleared here) and
// its row counts as ignored -- the CPU throws there, so a caller that needs that must read the flag.
void SoftmaxCrossEntropyForward(LossReduction red, int64_t n, int64_t c, FloatType t, const void* logits, IndexType it,
                                const void* labels, const void* weight, int64_t ignore_index, void* loss,
                                void* log_prob, int* bad_label, void* workspace, size_t workspace_bytes, void* stream);

// Its gradient (cpu::SoftmaxCrossEntropyGradF32 with the executor's factor): f_i = w[t_i] * dloss * scale, scale =
// 1 / sum of w[t_i] over rows not ignored for mean (0 when that sum is 0), 1 otherwise; dloss is dloss[0] (mean,
// sum) or dloss[i] (none), type t. dlogits[i, k] = (softmax_k - (k == t_i)) * f_i with e = VecExp(x - m) in float
// and its row sum in double, and exactly 0 in rows where f_i == 0 (ignored, or a bad label: *bad_label = 1).
// dlogits may not alias logits.
void SoftmaxCrossEntropyBackward(LossReduction red, int64_t n, int64_t c, FloatType t, const void* dloss,
                                 const void* logits, IndexType it, const void* labels, const void* weight,
                                 int64_t ignore_index, void* dlogits, int* bad_label, void* workspace,
                                 size_t workspace_bytes, void* stream);

// ---- Column sums ----------------------------------------------------------------------------------------------------
// Workspace of ReduceRowsToColumns (bytes).
size_t ReduceRowsToColumnsWorkspaceBytes(int64_t rows, int64_t cols);

// y[j] = sum over r of x[r, j] ([rows, cols] -> [cols]; the bias gradient / ReduceToShape over leading axes):
// accumulated in double over 64-row chunks, the chunks added in order, rounded once to yt. rows == 0 gives zeros.
// Deterministic.
void ReduceRowsToColumns(int64_t rows, int64_t cols, FloatType xt, const void* x, FloatType yt, void* y,
                         void* workspace, size_t workspace_bytes, void* stream);

}  // namespace ot::cuda
