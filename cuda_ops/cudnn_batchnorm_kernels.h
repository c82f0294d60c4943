// Our BatchNorm kernels (cudnn_batchnorm_kernels.cu), internal to cuda_ops: the implementation cudnn_batchnorm.cc
// runs where cuDNN does not (bf16 X, huge tensors, the backward with given statistics) and the statistics kernel
// it runs in every case for the ONNX running-statistics update (see cudnn_batchnorm.h).
//
// Layout: X [n, c, s] of type xt; element e of channel ch (e in [0, n s)) is X[(e / s) c s + ch s + e % s].
// Per-channel sums run over a fixed partition of [0, n s) into Chunks(n s) chunks (one block of kThreads each,
// a strided per-thread sum then a fixed shuffle tree), the chunk partials then added in chunk order by one thread
// per channel: the result depends on the sizes only (deterministic), sums in double.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cuda_ops/row_kernels.h"  // FloatType

namespace ot::cuda::bn_detail {

// Chunks per channel for m = n s elements (1 .. 128, about 1024 elements each).
int64_t Chunks(int64_t m);
// Bytes of the partial sums: 2 doubles per (channel, chunk).
size_t PartialBytes(int64_t c, int64_t m);

// stats[0..c) = batch mean, stats[c..2c) = biased batch variance, in double (sums of x - x_first and its square,
// x_first = the channel's first element, so the one-pass variance does not cancel for a large mean). Where
// rm_out / rv_out is not null (then rm / rv is not either), also the ONNX running update, in double, to fp32:
//   rm_out = momentum rm + (1 - momentum) mean,  rv_out = momentum rv + (1 - momentum) var.
void ChannelStats(FloatType xt, int64_t n, int64_t c, int64_t s, const void* x, double momentum, const float* rm,
                  const float* rv, float* rm_out, float* rv_out, double* partials, double* stats, void* stream);

// y = (x - mean) a + b with a = scale / sqrt(var + eps) (double); float X in double, half X in float from the float
// coefficients (cpu::BatchNormApply). Statistics: stats (double, ChannelStats' layout) or mean_f/var_f (fp32), one
// of the two null.
void Apply(FloatType xt, int64_t n, int64_t c, int64_t s, const void* x, const float* scale, const float* bias,
           const double* stats, const float* mean_f, const float* var_f, double eps, void* y, void* stream);

// Backward with the statistics as for Apply (training: ChannelStats' batch statistics; inference: the given ones):
// sums[0..c) = sum(dy), sums[c..2c) = sum(dy xhat) (double), dscale/dbias (may be null) their fp32 values, and
//   dx = training ? k (dy - sum(dy)/m - xhat sum(dy xhat)/m) : k dy,   k = scale / sqrt(var + eps),
// in double, rounded once to xt.
void Backward(FloatType xt, int64_t n, int64_t c, int64_t s, const void* dy, const void* x, const float* scale,
              const double* stats, const float* mean_f, const float* var_f, double eps, bool training, void* dx,
              float* dscale, float* dbias, double* partials, double* sums, void* stream);

}  // namespace ot::cuda::bn_detail
