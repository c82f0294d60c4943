// Multi-tensor optimizer step: see optimizer_kernels.h. One block per chunk of kOptimChunk elements of one tensor
// (a grid-stride loop over the list's chunks); a block finds its tensor by binary search in the chunk prefix sums.
// This file: packing, pass 1 (gradient check, accumulation), pass 2 for SGD / momentum / Nesterov / Adam / AdamW,
// pass 3, the statistics. LAMB's pass 2 is optimizer_lamb.cu.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "cuda_ops/launch_util.cuh"
#include "cuda_ops/optimizer_internal.h"
#include "cuda_ops/optimizer_kernels.h"
#include "kernel_common/half.h"
#include "kernel_common/optim_math.h"

namespace ot::cuda {

namespace optim {
namespace {

using detail::BlockSum;

// Pass 1 over every chunk. Plain (micro null): v = g / S per element. Accumulating: the tensor's sum becomes
// acc + g / S -- and at the K-th call the mean (acc + g / S) / K -- stored as float with the CPU's arithmetic (IEEE
// double steps in the CPU's order, written as intrinsics so that no FMA contraction changes a bit); the K-th call
// then checks and sums the stored mean, v = (double)mean, as the CPU does (SumSquares over acc_out, scale 1).
// Calls 1..K-1 check nothing and refresh the half copies (the CPU writes round(p) on every call).
// `last` is the same in every block (one *micro for the whole grid), so the block reductions are skipped
// uniformly.
__global__ void GradCheckKernel(const void* block, int num, int64_t chunks, const float* loss_scale,
                                const int64_t* micro, int64_t k, double* part, int* flag) {
  __shared__ double sh[33];
  const OptimTensor* ts = Tensors(block);
  const int64_t* off = ChunkOffsets(block, num);
  const double gs = GradScale(loss_scale);
  const bool acc = micro != nullptr;
  const bool last = !acc || *micro + 1 >= k;
  const double mean = acc && last ? 1.0 / static_cast<double>(k) : 1.0;
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int t = FindTensor(off, num, c);
    const OptimTensor& a = ts[t];
    const Range r = ChunkRange(off, t, c, a.n);
    double s = 0;
    int bad = 0;
    for (int64_t i = r.lo + threadIdx.x; i < r.hi; i += blockDim.x) {
      double v;
      if (acc) {
        const double g = __dmul_rn(LoadGrad(a.grad, a.grad_type, i), gs);
        const float sum = static_cast<float>(__dmul_rn(__dadd_rn(static_cast<double>(a.acc[i]), g), mean));
        a.acc[i] = sum;
        if (!last) {
          if (a.half_copy) StoreHalf(a, i, a.param[i]);
          continue;
        }
        v = static_cast<double>(sum);
      } else {
        v = LoadGrad(a.grad, a.grad_type, i) * gs;
      }
      s += v * v;
      bad |= !IsFiniteValue(v);
    }
    if (!last) continue;
    s = BlockSum(s, sh);
    bad = __syncthreads_or(bad);
    if (threadIdx.x == 0) {
      part[c] = s;
      flag[c] = bad ? 1 : 0;
    }
  }
}

// One block: the chunks' sums in a fixed order (strided per thread, then the tree), the flags ORed. A micro-step
// that only accumulated is no optimizer step: not skipped (found_inf 0), and its norm is NaN, as on the CPU.
__global__ void GradFinalizeKernel(int64_t chunks, const double* part, const int* flag, const int64_t* micro, int64_t k,
                                   double* total, int* found_inf, float* grad_norm) {
  __shared__ double sh[33];
  if (OnlyAccumulates(micro, k)) {
    if (threadIdx.x == 0) {
      *total = 0;
      *found_inf = 0;
      if (grad_norm) *grad_norm = __int_as_float(0x7fc00000);  // quiet NaN
    }
    return;
  }
  double s = 0;
  int bad = 0;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    s += part[c];
    bad |= flag[c];
  }
  s = BlockSum(s, sh);
  bad = __syncthreads_or(bad);
  if (threadIdx.x == 0) {
    *total = s;
    *found_inf = bad ? 1 : 0;
    if (grad_norm) *grad_norm = static_cast<float>(sqrt(s));
  }
}

// Pass 2 of the element-wise kinds, in place, one element at a time with the CPU's UpdateChunk arithmetic (double,
// one rounding to float per stored value). kKind: 0 SGD (no state), 1 momentum / Nesterov (s0 = the buffer),
// 2 Adam / AdamW (s0 = m, s1 = v). Each element is read before it is written by the same thread, so outputs that
// are the inputs' storage are fine.
template <int kKind>
__global__ void UpdateKernel(const void* block, int num, int64_t chunks, UpdateArgs u) {
  const int gate = GateOf(u.micro, u.accumulate, u.found_inf);
  if (gate == kOnlyAccumulate) return;
  const OptimTensor* ts = Tensors(block);
  const int64_t* off = ChunkOffsets(block, num);
  const bool from_acc = u.micro != nullptr;
  if (gate == kSkip) {  // a step with a non-finite gradient changes no parameter or state
    for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
      const int t = FindTensor(off, num, c);
      SkippedChunk(ts[t], ChunkRange(off, t, c, ts[t].n), from_acc);
    }
    return;
  }
  const StepScalars s = MakeScalars(u);
  const bool nesterov = u.kind == static_cast<int>(OptimKind::kNesterov);
  const bool decoupled = u.kind == static_cast<int>(OptimKind::kAdamW);
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int t = FindTensor(off, num, c);
    const OptimTensor a = ts[t];
    const Range r = ChunkRange(off, t, c, a.n);
    for (int64_t i = r.lo + threadIdx.x; i < r.hi; i += blockDim.x) {
      const double g = StepGrad(a, i, from_acc, s.gmul);
      if (from_acc) a.acc[i] = 0.f;  // the mean is used: the next accumulation starts from zero
      double p = static_cast<double>(a.param[i]);
      if constexpr (kKind == 0) {
        double buf = 0;
        p = SgdStep<double>(p, g, buf, s.first, s.lr, u.wd, 0.0, false);
      } else if constexpr (kKind == 1) {
        // The first step (no step taken yet) sets the buffer to the gradient, whatever it held (torch.optim.SGD).
        double buf = static_cast<double>(a.s0[i]);
        p = SgdStep<double>(p, g, buf, s.first, s.lr, u.wd, u.momentum, nesterov);
        a.s0[i] = static_cast<float>(buf);
      } else {
        double m = static_cast<double>(a.s0[i]), v = static_cast<double>(a.s1[i]);
        p = AdamStep<double>(p, g, m, v, s.lr, u.beta1, u.beta2, u.eps, u.wd, decoupled, s.bc1, s.bc2_sqrt);
        a.s0[i] = static_cast<float>(m);
        a.s1[i] = static_cast<float>(v);
      }
      const float pf = static_cast<float>(p);
      a.param[i] = pf;
      if (a.half_copy) StoreHalf(a, i, pf);
    }
  }
}

// Pass 3 (one thread). The counters move only here, after every other kernel of the call has read them.
__global__ void FinishKernel(const int* found_inf, int64_t* step, int64_t* micro, int64_t k, float* scale,
                             int64_t* good, int64_t* bad, bool dynamic, float growth, float backoff, float min_scale,
                             int64_t interval, int64_t overflows) {
  if (micro) {
    if (*micro + 1 < k) {  // only accumulated: no optimizer step, the step counter and the loss scale stay
      *micro += 1;
      return;
    }
    *micro = 0;
  }
  const bool finite = *found_inf == 0;
  if (finite && step) *step += 1;
  if (dynamic && scale) {
    float s = *scale;
    int64_t g = *good, b = *bad;
    LossScaleUpdate<float>(finite, s, g, b, growth, backoff, interval, overflows, min_scale);
    *scale = s;
    *good = g;
    *bad = b;
  }
}

}  // namespace
}  // namespace optim

using detail::CheckLaunch;
using detail::Require;
using optim::GridFor;
using optim::kThreads;

int OptimStateCount(OptimKind k) {
  switch (k) {
    case OptimKind::kSgd:
      return 0;
    case OptimKind::kMomentum:
    case OptimKind::kNesterov:
      return 1;
    default:
      return 2;
  }
}

OptimPack PackOptimTensors(const std::vector<OptimTensor>& tensors, OptimKind kind, bool accumulate) {
  Require(tensors.size() < (size_t{1} << 30), "PackOptimTensors: too many tensors");
  const int states = OptimStateCount(kind);
  OptimPack p;
  p.num_tensors = static_cast<int>(tensors.size());
  p.states = states;
  p.accumulate = accumulate;
  std::vector<int64_t> off(tensors.size() + 1, 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const OptimTensor& t = tensors[i];
    Require(t.n >= 0, "PackOptimTensors: negative n");
    if (t.n > 0) {
      Require(t.param && t.grad, "PackOptimTensors: null param or grad");
      Require(states < 1 || t.s0, "PackOptimTensors: null s0 (the optimizer kind has a state)");
      Require(states < 2 || t.s1, "PackOptimTensors: null s1 (the optimizer kind has two states)");
      Require(!accumulate || t.acc, "PackOptimTensors: null acc (gradient accumulation)");
    }
    if (t.half_copy)
      Require(t.half_type == FloatType::kF16 || t.half_type == FloatType::kBF16,
              "PackOptimTensors: half_type must be kF16 or kBF16");
    off[i + 1] = off[i] + (t.n + kOptimChunk - 1) / kOptimChunk;
  }
  p.num_chunks = off.back();
  const size_t tb = optim::TensorBytes(p.num_tensors);
  p.bytes.assign(tb + off.size() * sizeof(int64_t), 0);
  if (!tensors.empty()) std::memcpy(p.bytes.data(), tensors.data(), tensors.size() * sizeof(OptimTensor));
  std::memcpy(p.bytes.data() + tb, off.data(), off.size() * sizeof(int64_t));
  return p;
}

size_t OptimWorkspaceBytes(int64_t num_chunks, int num_tensors) {
  return optim::WorkspaceBytes(num_chunks, num_tensors);
}

namespace {
// The micro-step counter the kernels see: null without accumulation.
int64_t* MicroOf(const AccumState& a) { return a.on() ? a.micro : nullptr; }
}  // namespace

void MultiTensorGradCheck(const OptimList& list, const float* loss_scale, const AccumState& accum, int* found_inf,
                          float* grad_norm, void* workspace, size_t workspace_bytes, void* stream) {
  Require(found_inf != nullptr, "MultiTensorGradCheck: null found_inf");
  Require(workspace && workspace_bytes >= OptimWorkspaceBytes(list.num_chunks, list.num_tensors),
          "MultiTensorGradCheck: workspace too small (OptimWorkspaceBytes)");
  Require(list.num_chunks == 0 || list.device_block, "MultiTensorGradCheck: null device block");
  Require(!accum.on() || list.accumulate, "MultiTensorGradCheck: accumulation needs a list packed with its sums");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const optim::Ws w = optim::Layout(workspace, list.num_chunks);
  int64_t* micro = MicroOf(accum);
  if (list.num_chunks > 0) {
    optim::GradCheckKernel<<<GridFor(list.num_chunks), kThreads, 0, s>>>(
        list.device_block, list.num_tensors, list.num_chunks, loss_scale, micro, accum.k, w.part, w.flag);
    CheckLaunch("MultiTensorGradCheck");
  }
  optim::GradFinalizeKernel<<<1, 1024, 0, s>>>(list.num_chunks, w.part, w.flag, micro, accum.k, w.total, found_inf,
                                               grad_norm);
  CheckLaunch("MultiTensorGradCheck finalize");
}

void MultiTensorUpdate(const OptimList& list, const OptimHyper& h, const float* loss_scale, const AccumState& accum,
                       const int64_t* step, const int* found_inf, void* workspace, size_t workspace_bytes,
                       void* stream) {
  Require(step && found_inf, "MultiTensorUpdate: null step or found_inf");
  Require(workspace && workspace_bytes >= OptimWorkspaceBytes(list.num_chunks, list.num_tensors),
          "MultiTensorUpdate: workspace too small (OptimWorkspaceBytes)");
  Require(h.lr_schedule == 0 || h.lr_schedule == 1 || h.lr_schedule == 2, "MultiTensorUpdate: bad lr_schedule");
  const int kind = static_cast<int>(h.kind);
  Require(kind >= static_cast<int>(OptimKind::kSgd) && kind <= static_cast<int>(OptimKind::kLamb),
          "MultiTensorUpdate: bad optimizer kind");
  if (list.num_chunks == 0) return;
  Require(list.device_block != nullptr, "MultiTensorUpdate: null device block");
  Require(list.states >= OptimStateCount(h.kind), "MultiTensorUpdate: the list was packed for fewer states");
  Require(!accum.on() || list.accumulate, "MultiTensorUpdate: accumulation needs a list packed with its sums");
  const optim::Ws w = optim::Layout(workspace, list.num_chunks);
  optim::UpdateArgs u;
  u.lr = h.lr;
  u.beta1 = h.beta1;
  u.beta2 = h.beta2;
  u.eps = h.eps;
  u.wd = h.weight_decay;
  u.momentum = h.momentum;
  u.max_norm = h.max_grad_norm;
  u.lr_device = h.lr_device;
  u.lr_device_f64 = h.lr_device_f64;
  u.loss_scale = loss_scale;
  u.step = step;
  u.found_inf = found_inf;
  u.total_sq = w.total;
  u.micro = MicroOf(accum);
  u.accumulate = accum.k;
  u.schedule = h.lr_schedule;
  u.kind = kind;
  u.warmup = h.warmup;
  u.total = h.total_steps;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int grid = GridFor(list.num_chunks);
  switch (h.kind) {
    case OptimKind::kSgd:
      optim::UpdateKernel<0><<<grid, kThreads, 0, s>>>(list.device_block, list.num_tensors, list.num_chunks, u);
      break;
    case OptimKind::kMomentum:
    case OptimKind::kNesterov:
      optim::UpdateKernel<1><<<grid, kThreads, 0, s>>>(list.device_block, list.num_tensors, list.num_chunks, u);
      break;
    case OptimKind::kAdam:
    case OptimKind::kAdamW:
      optim::UpdateKernel<2><<<grid, kThreads, 0, s>>>(list.device_block, list.num_tensors, list.num_chunks, u);
      break;
    case OptimKind::kLamb:
      optim::LaunchLambUpdate(list, u, w, s);
      return;
  }
  CheckLaunch("MultiTensorUpdate");
}

void FinishOptimizerStep(const int* found_inf, int64_t* step, const LossScaleState& ls, const AccumState& accum,
                         void* stream) {
  Require(found_inf != nullptr, "FinishOptimizerStep: null found_inf");
  const bool dynamic = ls.dynamic && ls.scale;
  if (dynamic) Require(ls.good && ls.bad, "FinishOptimizerStep: a dynamic loss scale needs the good/bad counters");
  optim::FinishKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      found_inf, step, MicroOf(accum), accum.k, ls.scale, ls.good, ls.bad, dynamic, ls.growth, ls.backoff, ls.min_scale,
      ls.growth_interval, ls.overflows);
  CheckLaunch("FinishOptimizerStep");
}

void MultiTensorStep(const OptimList& list, const OptimHyper& h, const LossScaleState& ls, const AccumState& accum,
                     int64_t* step, int* found_inf, float* grad_norm, void* workspace, size_t workspace_bytes,
                     void* stream) {
  MultiTensorGradCheck(list, ls.scale, accum, found_inf, grad_norm, workspace, workspace_bytes, stream);
  MultiTensorUpdate(list, h, ls.scale, accum, step, found_inf, workspace, workspace_bytes, stream);
  FinishOptimizerStep(found_inf, step, ls, accum, stream);
}

// ---- Statistics: L2 norm of the parameters and the share of exactly-zero gradient elements -----------------------
namespace {
using detail::Align256;
using detail::BlockSum;

__global__ void StatsChunkKernel(const void* block, int num, int64_t chunks, double* part_sq, long long* part_zero) {
  __shared__ double sh[33];
  __shared__ long long shz[33];
  const OptimTensor* ts = optim::Tensors(block);
  const int64_t* off = optim::ChunkOffsets(block, num);
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int t = optim::FindTensor(off, num, c);
    const OptimTensor& a = ts[t];
    const optim::Range r = optim::ChunkRange(off, t, c, a.n);
    double s = 0;
    long long z = 0;
    for (int64_t i = r.lo + threadIdx.x; i < r.hi; i += blockDim.x) {
      const double p = static_cast<double>(a.param[i]);
      s += p * p;
      z += optim::LoadGrad(a.grad, a.grad_type, i) == 0.0 ? 1 : 0;
    }
    s = BlockSum(s, sh);
    z = BlockSum(z, shz);
    if (threadIdx.x == 0) {
      part_sq[c] = s;
      part_zero[c] = z;
    }
  }
}

__global__ void StatsFinalizeKernel(int64_t chunks, const double* part_sq, const long long* part_zero, int64_t total,
                                    float* param_norm, float* zero_fraction) {
  __shared__ double sh[33];
  __shared__ long long shz[33];
  double s = 0;
  long long z = 0;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    s += part_sq[c];
    z += part_zero[c];
  }
  s = BlockSum(s, sh);
  z = BlockSum(z, shz);
  if (threadIdx.x == 0) {
    if (param_norm) *param_norm = static_cast<float>(sqrt(s));
    if (zero_fraction)
      *zero_fraction = total ? static_cast<float>(static_cast<double>(z) / static_cast<double>(total)) : 0.f;
  }
}
}  // namespace

size_t MultiTensorStatsWorkspaceBytes(int64_t num_chunks) {
  const size_t c = static_cast<size_t>(num_chunks > 0 ? num_chunks : 1);
  return Align256(c * 8) * 2;
}

void MultiTensorStats(const OptimList& list, int64_t total_elements, float* param_norm, float* zero_fraction,
                      void* workspace, size_t workspace_bytes, void* stream) {
  Require(list.num_chunks == 0 || list.device_block, "MultiTensorStats: null device block");
  Require(workspace && workspace_bytes >= MultiTensorStatsWorkspaceBytes(list.num_chunks),
          "MultiTensorStats: workspace too small (MultiTensorStatsWorkspaceBytes)");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const size_t c = static_cast<size_t>(list.num_chunks > 0 ? list.num_chunks : 1);
  double* part_sq = static_cast<double*>(workspace);
  long long* part_zero = reinterpret_cast<long long*>(static_cast<char*>(workspace) + Align256(c * 8));
  if (list.num_chunks > 0) {
    StatsChunkKernel<<<GridFor(list.num_chunks), kThreads, 0, s>>>(list.device_block, list.num_tensors, list.num_chunks,
                                                                   part_sq, part_zero);
    CheckLaunch("MultiTensorStats");
  }
  StatsFinalizeKernel<<<1, kThreads, 0, s>>>(list.num_chunks, part_sq, part_zero, total_elements, param_norm,
                                             zero_fraction);
  CheckLaunch("MultiTensorStats");
}

}  // namespace ot::cuda
