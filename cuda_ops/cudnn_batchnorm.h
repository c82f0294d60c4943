// BatchNormalization on the GPU: training forward (batch statistics, running-statistics update), inference forward
// and backward (through the batch statistics, or with given statistics), the GPU side of the CPU's
// BatchNormalization / BatchNormGrad kernels (executor/kernels/norm.cc, internal_norm.cc, cpu_ops/norm.h).
// X, Y, dY, dX: [n, c, spatial] (any NC... tensor viewed so; spatial = 1 for [N, C]) of type xt = fp32, fp16 or
// bf16; scale, bias, means, variances and their gradients: fp32 [c]. Plain host C++ over device pointers and a
// stream (void* = cudaStream_t); asynchronous, no host synchronisation (capturable in a CUDA graph).
//
// Two implementations, the same formulas:
//  - cuDNN (CUDNN_BATCHNORM_SPATIAL; cudnnBatchNormalizationForwardTraining / ForwardInference / Backward) for
//    fp32 and fp16 X whose sizes fit cuDNN's ints. cuDNN's statistics are fp32, its batch variance the biased one.
//  - our kernels (cudnn_batchnorm_kernels.cu) for bf16 X (the legacy batch-norm API documents fp32/fp16/double X
//    only), for tensors of 2^31 elements or more, for the backward with given statistics (cuDNN has none), and
//    wherever `own_kernels` asks for them (tests run both). Per-channel sums in double over a fixed partition of
//    each channel's N x spatial elements into chunks, the chunks added in order (deterministic, no atomics);
//    the CPU's arithmetic (double; half X normalized in float from float coefficients, as cpu::BatchNormApply).
//
// Running statistics (training forward) follow ONNX and the CPU kernel, not cuDNN: with momentum m,
//     running_mean_out = m * running_mean + (1 - m) * batch_mean
//     running_var_out  = m * running_var  + (1 - m) * batch_var        (batch_var BIASED: sum (x - mean)^2 / (N S))
// cuDNN's own running update uses exponentialAverageFactor = 1 - m but the unbiased batch variance (x N S / (N S - 1)),
// so it is not used: the batch mean and biased variance are computed by our statistics kernel (double, exact
// for the CPU's formula) and the update is our kernel's, in double, rounded once to fp32, in both implementations.
//
// Backward (BatchNormGrad): training -- dX through the batch statistics, recomputed from X (the IR op has no saved
// ones): xhat = (x - mean) r, r = 1 / sqrt(var + eps), dX = scale r (dY - mean(dY) - xhat mean(dY xhat));
// inference -- mean/var given: dX = scale r dY. Both: dScale = sum(dY xhat), dBias = sum(dY), over N x spatial.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda_ops/row_kernels.h"  // FloatType

namespace ot::cuda {

struct BatchNormDesc {
  int64_t n = 0, c = 0, spatial = 1;  // X viewed as [n, c, spatial]; all > 0
  FloatType xt = FloatType::kF32;     // X, Y, dY, dX
  double eps = 1e-5;                  // > 0
  bool own_kernels = false;           // use our kernels even where cuDNN could run (tests)
};

std::string ToString(const BatchNormDesc& d);
// Host-only: std::invalid_argument for non-positive sizes or eps.
void ValidateBatchNorm(const BatchNormDesc& d);
// Host-only: whether the cuDNN implementation runs this desc (see above).
bool BatchNormUsesCudnn(const BatchNormDesc& d);

// Workspace of BatchNormForwardTraining and BatchNormBackward (bytes, 256-byte aligned base expected).
size_t BatchNormWorkspaceBytes(const BatchNormDesc& d);

// Training forward: y normalized with the batch statistics. running_mean / running_var (inputs) and their
// outputs may all be null (no update), or the four given (an output may alias its input). momentum in [0, 1].
void BatchNormForwardTraining(const BatchNormDesc& d, const void* x, const float* scale, const float* bias,
                              const float* running_mean, const float* running_var, double momentum, void* y,
                              float* running_mean_out, float* running_var_out, void* workspace, size_t workspace_bytes,
                              void* stream);

// Inference forward: y = (x - mean) scale / sqrt(var + eps) + bias with the given statistics.
void BatchNormForwardInference(const BatchNormDesc& d, const void* x, const float* scale, const float* bias,
                               const float* mean, const float* var, void* y, void* stream);

// Backward. mean == var == nullptr: training (statistics recomputed from x); both given: inference. dscale and
// dbias may be null (not wanted). dx may not alias dy or x.
void BatchNormBackward(const BatchNormDesc& d, const void* dy, const void* x, const float* scale, const float* mean,
                       const float* var, void* dx, float* dscale, float* dbias, void* workspace, size_t workspace_bytes,
                       void* stream);

}  // namespace ot::cuda
