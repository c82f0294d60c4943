// LAMB's pass 2 (NVIDIA Apex FusedLAMB, as cpu::MultiTensorUpdate computes it): see optimizer_kernels.h.
//
// The CPU writes the update direction u = LambDirection(...) into p_out (as float), sums ||w||^2 of the old
// parameter and ||u||^2 of that stored u per tensor (double), and then sets p' = p - lr * ratio * u. On the GPU the
// parameter is updated in place and there is no buffer of the model's size for u, so u is computed twice from the
// same inputs -- once for the norms, once for the update -- by one non-inlined function (the same machine code, so
// both passes see the same float u bit for bit):
//   1. LambNormKernel: per chunk, the double sums of w^2 and of (float)u^2 (a fixed-order block tree);
//   2. LambRatioKernel: one block per tensor adds its chunks' sums in a fixed order (strided per thread, then the
//      tree) and stores LambTrustRatio(||w||, ||u||, weight_decay);
//   3. LambApplyKernel: recomputes u and the moments, writes m, v, p' = p - (lr * ratio) * u (IEEE steps as on the
//      CPU), the half copy and, accumulating, zeroes the sum.
// No kernel changes anything before the last one runs, so 1 and 2 read the step's inputs; every element is read
// before the same thread writes it in 3, so in-place operands are fine. A skipped step runs only 3's skip branch.
#include <cuda_runtime.h>

#include "cuda_ops/launch_util.cuh"
#include "cuda_ops/optimizer_internal.h"
#include "kernel_common/optim_math.h"

namespace ot::cuda::optim {

namespace {

using detail::BlockSum;

struct LambOut {
  float u;      // the update direction as the CPU stores it (float)
  double m, v;  // the new moments (double; stored as float by the apply pass)
};

struct LambArgs {
  double beta1, beta2, eps, wd, bc1, bc2;
};

// The one definition of element i's direction that both passes call. __noinline__: two inlined copies could be
// contracted into FMAs differently, and the norm would then be of another u than the one applied.
__device__ __noinline__ LambOut LambElement(double p, double g, double m, double v, LambArgs a) {
  LambOut o;
  o.u = static_cast<float>(LambDirection<double>(p, g, m, v, a.beta1, a.beta2, a.eps, a.wd, a.bc1, a.bc2));
  o.m = m;
  o.v = v;
  return o;
}

__device__ __forceinline__ LambArgs ArgsOf(const UpdateArgs& u, const StepScalars& s) {
  return {u.beta1, u.beta2, u.eps, u.wd, s.bc1, s.bc2};
}

__global__ void LambNormKernel(const void* block, int num, int64_t chunks, UpdateArgs u, double* wpart, double* upart) {
  __shared__ double sh[33];
  if (GateOf(u.micro, u.accumulate, u.found_inf) != kApply) return;
  const OptimTensor* ts = Tensors(block);
  const int64_t* off = ChunkOffsets(block, num);
  const bool from_acc = u.micro != nullptr;
  const StepScalars s = MakeScalars(u);
  const LambArgs la = ArgsOf(u, s);
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int t = FindTensor(off, num, c);
    const OptimTensor a = ts[t];
    const Range r = ChunkRange(off, t, c, a.n);
    double ws = 0, us = 0;
    for (int64_t i = r.lo + threadIdx.x; i < r.hi; i += blockDim.x) {
      const double w = static_cast<double>(a.param[i]);
      const LambOut o = LambElement(w, StepGrad(a, i, from_acc, s.gmul), a.s0[i], a.s1[i], la);
      const double ud = static_cast<double>(o.u);
      ws += w * w;
      us += ud * ud;
    }
    ws = BlockSum(ws, sh);
    us = BlockSum(us, sh);
    if (threadIdx.x == 0) {
      wpart[c] = ws;
      upart[c] = us;
    }
  }
}

__global__ void LambRatioKernel(const void* block, int num, UpdateArgs u, const double* wpart, const double* upart,
                                double* ratio) {
  __shared__ double sh[33];
  if (GateOf(u.micro, u.accumulate, u.found_inf) != kApply) return;
  const int64_t* off = ChunkOffsets(block, num);
  for (int t = blockIdx.x; t < num; t += gridDim.x) {
    double ws = 0, us = 0;
    for (int64_t c = off[t] + threadIdx.x; c < off[t + 1]; c += blockDim.x) {
      ws += wpart[c];
      us += upart[c];
    }
    ws = BlockSum(ws, sh);
    us = BlockSum(us, sh);
    if (threadIdx.x == 0) ratio[t] = LambTrustRatio(sqrt(ws), sqrt(us), u.wd);
  }
}

__global__ void LambApplyKernel(const void* block, int num, int64_t chunks, UpdateArgs u, const double* ratio) {
  const int gate = GateOf(u.micro, u.accumulate, u.found_inf);
  if (gate == kOnlyAccumulate) return;
  const OptimTensor* ts = Tensors(block);
  const int64_t* off = ChunkOffsets(block, num);
  const bool from_acc = u.micro != nullptr;
  if (gate == kSkip) {
    for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
      const int t = FindTensor(off, num, c);
      SkippedChunk(ts[t], ChunkRange(off, t, c, ts[t].n), from_acc);
    }
    return;
  }
  const StepScalars s = MakeScalars(u);
  const LambArgs la = ArgsOf(u, s);
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int t = FindTensor(off, num, c);
    const OptimTensor a = ts[t];
    const Range r = ChunkRange(off, t, c, a.n);
    const double scale = s.lr * ratio[t];  // the CPU's s = lr * ratio[tensor]
    for (int64_t i = r.lo + threadIdx.x; i < r.hi; i += blockDim.x) {
      const double w = static_cast<double>(a.param[i]);
      const LambOut o = LambElement(w, StepGrad(a, i, from_acc, s.gmul), a.s0[i], a.s1[i], la);
      if (from_acc) a.acc[i] = 0.f;
      a.s0[i] = static_cast<float>(o.m);
      a.s1[i] = static_cast<float>(o.v);
      const float pf = static_cast<float>(__dsub_rn(w, __dmul_rn(scale, static_cast<double>(o.u))));
      a.param[i] = pf;
      if (a.half_copy) StoreHalf(a, i, pf);
    }
  }
}

}  // namespace

void LaunchLambUpdate(const OptimList& list, const UpdateArgs& u, const Ws& w, cudaStream_t stream) {
  if (list.num_chunks == 0) return;
  const int grid = GridFor(list.num_chunks);
  LambNormKernel<<<grid, kThreads, 0, stream>>>(list.device_block, list.num_tensors, list.num_chunks, u, w.wpart,
                                                w.upart);
  detail::CheckLaunch("MultiTensorUpdate (LAMB norms)");
  LambRatioKernel<<<GridFor(list.num_tensors), kThreads, 0, stream>>>(list.device_block, list.num_tensors, u, w.wpart,
                                                                      w.upart, w.ratio);
  detail::CheckLaunch("MultiTensorUpdate (LAMB trust ratios)");
  LambApplyKernel<<<grid, kThreads, 0, stream>>>(list.device_block, list.num_tensors, list.num_chunks, u, w.ratio);
  detail::CheckLaunch("MultiTensorUpdate (LAMB update)");
}

}  // namespace ot::cuda::optim
