// Internal to the multi-tensor optimizer (cuda_ops/optimizer_kernels.cu, optimizer_lamb.cu): the descriptor block
// and workspace layouts, the per-call device scalars, and the device helpers both files use. CUDA device code:
// include only from .cu files of cuda_ops (no public header includes it).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda_ops/launch_util.cuh"
#include "cuda_ops/optimizer_kernels.h"
#include "kernel_common/half.h"
#include "kernel_common/optim_math.h"

namespace ot::cuda::optim {

constexpr int kThreads = 256;  // every per-chunk kernel: one block of kThreads per chunk (grid-stride over chunks)
constexpr int kMaxGrid = 1 << 16;

inline int GridFor(int64_t items) { return static_cast<int>(items < 1 ? 1 : (items < kMaxGrid ? items : kMaxGrid)); }

// Bytes of the OptimTensor array at the start of a descriptor block; the chunk prefix sums follow (8-aligned).
__host__ __device__ inline size_t TensorBytes(int n) {
  return (static_cast<size_t>(n) * sizeof(OptimTensor) + 7) & ~size_t{7};
}

// Workspace: [0] the double total sum of squares (256 bytes reserved); then, each 256-aligned, the per-chunk double
// partials and int flags of pass 1, LAMB's per-chunk double sums of w^2 and u^2, and its per-tensor trust ratios.
struct Ws {
  double* total;
  double* part;
  int* flag;
  double* wpart;
  double* upart;
  double* ratio;
};
__host__ __device__ inline size_t Al256(size_t b) { return (b + 255) & ~size_t{255}; }
__host__ __device__ inline Ws Layout(void* w, int64_t chunks) {
  const size_t c = static_cast<size_t>(chunks > 0 ? chunks : 1);
  char* b = static_cast<char*>(w);
  Ws l;
  l.total = reinterpret_cast<double*>(b);
  size_t at = 256;
  l.part = reinterpret_cast<double*>(b + at);
  at += Al256(c * 8);
  l.flag = reinterpret_cast<int*>(b + at);
  at += Al256(c * 4);
  l.wpart = reinterpret_cast<double*>(b + at);
  at += Al256(c * 8);
  l.upart = reinterpret_cast<double*>(b + at);
  at += Al256(c * 8);
  l.ratio = reinterpret_cast<double*>(b + at);  // last: WorkspaceBytes sizes them by the tensor count
  return l;
}
inline size_t WorkspaceBytes(int64_t chunks, int tensors) {
  const size_t c = static_cast<size_t>(chunks > 0 ? chunks : 1), t = static_cast<size_t>(tensors > 0 ? tensors : 1);
  return 256 + 3 * Al256(c * 8) + Al256(c * 4) + Al256(t * 8);
}

// The descriptor block's parts.
__device__ __forceinline__ const OptimTensor* Tensors(const void* block) {
  return static_cast<const OptimTensor*>(block);
}
__device__ __forceinline__ const int64_t* ChunkOffsets(const void* block, int num) {
  return reinterpret_cast<const int64_t*>(static_cast<const char*>(block) + TensorBytes(num));
}

// The tensor of chunk c: the last t with off[t] <= c (off has num + 1 entries, off[num] = total chunks > c).
__device__ __forceinline__ int FindTensor(const int64_t* off, int num, int64_t c) {
  int lo = 0, hi = num - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (off[mid] <= c)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Elements [lo, hi) of chunk c of tensor t.
struct Range {
  int64_t lo, hi;
};
__device__ __forceinline__ Range ChunkRange(const int64_t* off, int t, int64_t c, int64_t n) {
  const int64_t lo = (c - off[t]) * kOptimChunk;
  return {lo, lo + kOptimChunk < n ? lo + kOptimChunk : n};
}

__device__ __forceinline__ double LoadGrad(const void* g, FloatType t, int64_t i) {
  switch (t) {
    case FloatType::kF16:
      return static_cast<double>(HalfBitsToFloat(static_cast<const uint16_t*>(g)[i]));
    case FloatType::kBF16:
      return static_cast<double>(Bf16BitsToFloat(static_cast<const uint16_t*>(g)[i]));
    default:
      return static_cast<double>(static_cast<const float*>(g)[i]);
  }
}

// 1/S, the factor of every incoming gradient (exact when S is a power of two); 1 without loss scaling.
__device__ __forceinline__ double GradScale(const float* loss_scale) {
  return loss_scale ? 1.0 / static_cast<double>(*loss_scale) : 1.0;
}

__device__ __forceinline__ void StoreHalf(const OptimTensor& a, int64_t i, float p) {
  static_cast<uint16_t*>(a.half_copy)[i] = a.half_type == FloatType::kBF16 ? FloatToBf16Bits(p) : FloatToHalfBits(p);
}

// What this call does. Every kernel of a call reads the same *micro (only FinishOptimizerStep, the call's last
// kernel, moves it) and the *found_inf pass 1 wrote, so they all agree.
enum Gate : int { kApply = 0, kSkip = 1, kOnlyAccumulate = 2 };
__device__ __forceinline__ bool OnlyAccumulates(const int64_t* micro, int64_t k) { return micro && *micro + 1 < k; }
__device__ __forceinline__ int GateOf(const int64_t* micro, int64_t k, const int* found_inf) {
  if (OnlyAccumulates(micro, k)) return kOnlyAccumulate;
  return *found_inf ? kSkip : kApply;
}

// The hyperparameters of pass 2 as kernel arguments. micro: null without accumulation.
struct UpdateArgs {
  double lr, beta1, beta2, eps, wd, momentum, max_norm;
  const float* lr_device;
  const double* lr_device_f64;
  const float* loss_scale;
  const int64_t* step;
  const int* found_inf;
  const double* total_sq;
  const int64_t* micro;
  int64_t accumulate;
  int schedule;
  int kind;  // OptimKind
  int64_t warmup, total;
};

// The per-step scalars every element of an applied step uses, as the CPU's Apply computes them: t = step + 1,
// bias corrections of t, the scheduled lr of `step`, and the gradient factor: ClipCoefficient of the norm times 1/S
// (1 when the gradient is the accumulated mean, which is unscaled already).
struct StepScalars {
  double lr, gmul, bc1, bc2, bc2_sqrt;
  bool first;  // no step taken yet: SGD's momentum buffer starts as the gradient
};
__device__ __forceinline__ StepScalars MakeScalars(const UpdateArgs& u) {
  StepScalars s;
  const int64_t done = *u.step;
  const double t1 = static_cast<double>(done + 1);
  s.bc1 = BiasCorrection(u.beta1, t1);
  s.bc2 = BiasCorrection(u.beta2, t1);
  s.bc2_sqrt = sqrt(s.bc2);
  const double base_lr = u.lr_device_f64 ? *u.lr_device_f64 : u.lr_device ? static_cast<double>(*u.lr_device) : u.lr;
  s.lr = base_lr * LrScheduleFactor(u.schedule, done, u.warmup, u.total);
  const double gs = u.micro ? 1.0 : GradScale(u.loss_scale);
  s.gmul = ClipCoefficient(sqrt(*u.total_sq), u.max_norm) * gs;
  s.first = done == 0;
  return s;
}

// The incoming gradient of element i of an applied step, times gmul: the accumulated mean (float, stored by pass
// 1) or this call's gradient.
__device__ __forceinline__ double StepGrad(const OptimTensor& a, int64_t i, bool from_acc, double gmul) {
  return gmul * (from_acc ? static_cast<double>(a.acc[i]) : LoadGrad(a.grad, a.grad_type, i));
}

// A skipped step over one chunk (the CPU's CopyChunk + epilogue, in place): parameters and states keep their bits;
// the half copy is round(p) again (what it holds already when it is the state's own storage), and the K-th call of
// an accumulation leaves its sums zero, applied or not.
__device__ __forceinline__ void SkippedChunk(const OptimTensor& a, Range r, bool from_acc) {
  if (!a.half_copy && !from_acc) return;
  for (int64_t i = r.lo + threadIdx.x; i < r.hi; i += blockDim.x) {
    if (a.half_copy) StoreHalf(a, i, a.param[i]);
    if (from_acc) a.acc[i] = 0.f;
  }
}

// optimizer_lamb.cu: LAMB's pass 2 (three launches on `stream`).
void LaunchLambUpdate(const OptimList& list, const UpdateArgs& u, const Ws& w, cudaStream_t stream);

}  // namespace ot::cuda::optim
