// Multi-tensor Adam step: see optimizer_kernels.h. One block per chunk of kAdamChunk elements of one tensor (a
// grid-stride loop over the list's chunks); a block finds its tensor by binary search in the chunk prefix sums.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda_ops/optimizer_kernels.h"
#include "cuda_ops/launch_util.cuh"
#include "kernel_common/half.h"
#include "kernel_common/optim_math.h"

namespace ot::cuda {

namespace {

using detail::Align256;
using detail::BlockSum;
using detail::CheckLaunch;
using detail::DispatchFloat;
using detail::DispatchIndex;
using detail::Require;

constexpr int kThreads = 256;
constexpr int kMaxGrid = 1 << 16;

__host__ __device__ inline size_t TensorBytes(int n) { return (static_cast<size_t>(n) * sizeof(AdamTensor) + 7) & ~size_t{7}; }

// Workspace: [0] double total sum of squares; [256...] per-chunk double partials; then per-chunk int flags.
struct Ws {
  double* total;
  double* part;
  int* flag;
};
__host__ __device__ inline Ws Layout(void* w, int64_t chunks) {
  char* b = static_cast<char*>(w);
  Ws l;
  l.total = reinterpret_cast<double*>(b);
  l.part = reinterpret_cast<double*>(b + 256);
  l.flag = reinterpret_cast<int*>(b + 256 + ((static_cast<size_t>(chunks) * 8 + 255) & ~size_t{255}));
  return l;
}


__device__ __forceinline__ double LoadGrad(const void* g, FloatType t, int64_t i) {
  switch (t) {
    case FloatType::kF16: return static_cast<double>(HalfBitsToFloat(static_cast<const uint16_t*>(g)[i]));
    case FloatType::kBF16: return static_cast<double>(Bf16BitsToFloat(static_cast<const uint16_t*>(g)[i]));
    default: return static_cast<double>(static_cast<const float*>(g)[i]);
  }
}

// The tensor of chunk c: the last t with off[t] <= c (off has num + 1 entries, off[num] = total chunks > c).
__device__ int FindTensor(const int64_t* off, int num, int64_t c) {
  int lo = 0, hi = num - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (off[mid] <= c) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

__device__ __forceinline__ double GradScale(const float* loss_scale) {
  return loss_scale ? 1.0 / static_cast<double>(*loss_scale) : 1.0;
}

__global__ void GradCheckKernel(const void* block, int num, int64_t chunks, const float* loss_scale, double* part,
                                int* flag) {
  __shared__ double sh[33];
  const AdamTensor* ts = static_cast<const AdamTensor*>(block);
  const int64_t* off = reinterpret_cast<const int64_t*>(static_cast<const char*>(block) + TensorBytes(num));
  const double gs = GradScale(loss_scale);
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int t = FindTensor(off, num, c);
    const AdamTensor& a = ts[t];
    const int64_t lo = (c - off[t]) * kAdamChunk, hi = lo + kAdamChunk < a.n ? lo + kAdamChunk : a.n;
    double s = 0;
    int bad = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      const double v = LoadGrad(a.grad, a.grad_type, i) * gs;
      s += v * v;
      bad |= !IsFiniteValue(v);
    }
    s = BlockSum(s, sh);
    bad = __syncthreads_or(bad);
    if (threadIdx.x == 0) {
      part[c] = s;
      flag[c] = bad ? 1 : 0;
    }
  }
}

// One block: the chunks' sums in a fixed order (strided per thread, then the tree), the flags ORed.
__global__ void GradFinalizeKernel(int64_t chunks, const double* part, const int* flag, double* total, int* found_inf,
                                   float* grad_norm) {
  __shared__ double sh[33];
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

// kernel_common/optim_math.h's LrScheduleFactor (host-only there: std::cos), the same arithmetic on the device.
__device__ double LrFactor(int kind, int64_t done, int64_t warmup, int64_t total) {
  const double s = static_cast<double>(done);
  if (done < warmup) return s / static_cast<double>(warmup);
  const double span = static_cast<double>(total - warmup > 1 ? total - warmup : 1);
  const double progress = (s - static_cast<double>(warmup)) / span;
  switch (kind) {
    case 1: return progress >= 1 ? 0.0 : 1.0 - progress;
    case 2: return progress >= 1 ? 0.0 : 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
    default: return 1.0;
  }
}

struct UpdateArgs {
  double lr, beta1, beta2, eps, wd, max_norm;
  const float* lr_device;
  const double* lr_device_f64;
  int schedule;
  bool adamw;
  int64_t warmup, total;
};

__global__ void AdamUpdateKernel(const void* block, int num, int64_t chunks, UpdateArgs u, const float* loss_scale,
                                 const int64_t* step, const int* found_inf, const double* total_sq) {
  if (*found_inf) return;  // a step with a non-finite gradient changes nothing
  const AdamTensor* ts = static_cast<const AdamTensor*>(block);
  const int64_t* off = reinterpret_cast<const int64_t*>(static_cast<const char*>(block) + TensorBytes(num));
  const int64_t done = *step;
  const double t1 = static_cast<double>(done + 1);
  const double bc1 = BiasCorrection(u.beta1, t1), bc2 = BiasCorrection(u.beta2, t1);
  const double bc2_sqrt = sqrt(bc2);
  const double base_lr = u.lr_device_f64 ? *u.lr_device_f64 : u.lr_device ? static_cast<double>(*u.lr_device) : u.lr;
  const double lr = base_lr * LrFactor(u.schedule, done, u.warmup, u.total);
  const double gmul = ClipCoefficient(sqrt(*total_sq), u.max_norm) * GradScale(loss_scale);
  const double wd = u.wd;
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int t = FindTensor(off, num, c);
    const AdamTensor a = ts[t];
    const int64_t lo = (c - off[t]) * kAdamChunk, hi = lo + kAdamChunk < a.n ? lo + kAdamChunk : a.n;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      double m = a.m[i], v = a.v[i];
      const double g = gmul * LoadGrad(a.grad, a.grad_type, i);
      const double p = AdamStep<double>(static_cast<double>(a.param[i]), g, m, v, lr, u.beta1, u.beta2, u.eps, wd,
                                        u.adamw, bc1, bc2_sqrt);
      const float pf = static_cast<float>(p);
      a.param[i] = pf;
      a.m[i] = static_cast<float>(m);
      a.v[i] = static_cast<float>(v);
      if (a.half_copy) {
        static_cast<uint16_t*>(a.half_copy)[i] =
            a.half_type == FloatType::kBF16 ? FloatToBf16Bits(pf) : FloatToHalfBits(pf);
      }
    }
  }
}

__global__ void FinishKernel(const int* found_inf, int64_t* step, float* scale, int64_t* good, int64_t* bad,
                             bool dynamic, float growth, float backoff, float min_scale, int64_t interval,
                             int64_t overflows) {
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

int GridFor(int64_t chunks) { return static_cast<int>(chunks < 1 ? 1 : (chunks < kMaxGrid ? chunks : kMaxGrid)); }

}  // namespace

AdamPack PackAdamTensors(const std::vector<AdamTensor>& tensors) {
  Require(tensors.size() < (size_t{1} << 30), "PackAdamTensors: too many tensors");
  AdamPack p;
  p.num_tensors = static_cast<int>(tensors.size());
  std::vector<int64_t> off(tensors.size() + 1, 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const AdamTensor& t = tensors[i];
    Require(t.n >= 0, "PackAdamTensors: negative n");
    if (t.n > 0) Require(t.param && t.grad && t.m && t.v, "PackAdamTensors: null param, grad, m or v");
    if (t.half_copy)
      Require(t.half_type == FloatType::kF16 || t.half_type == FloatType::kBF16,
              "PackAdamTensors: half_type must be kF16 or kBF16");
    off[i + 1] = off[i] + (t.n + kAdamChunk - 1) / kAdamChunk;
  }
  p.num_chunks = off.back();
  const size_t tb = TensorBytes(p.num_tensors);
  p.bytes.assign(tb + off.size() * sizeof(int64_t), 0);
  if (!tensors.empty()) std::memcpy(p.bytes.data(), tensors.data(), tensors.size() * sizeof(AdamTensor));
  std::memcpy(p.bytes.data() + tb, off.data(), off.size() * sizeof(int64_t));
  return p;
}

size_t AdamWorkspaceBytes(int64_t num_chunks) {
  const size_t c = static_cast<size_t>(num_chunks > 0 ? num_chunks : 1);
  return 256 + Align256(c * 8) + Align256(c * 4);
}

void MultiTensorGradCheck(const AdamList& list, const float* loss_scale, int* found_inf, float* grad_norm,
                          void* workspace, size_t workspace_bytes, void* stream) {
  Require(found_inf != nullptr, "MultiTensorGradCheck: null found_inf");
  Require(list.num_tensors >= 0 && list.num_chunks >= 0, "MultiTensorGradCheck: bad list");
  Require(list.num_chunks == 0 || list.device_block, "MultiTensorGradCheck: null device block");
  Require(workspace && workspace_bytes >= AdamWorkspaceBytes(list.num_chunks),
          "MultiTensorGradCheck: workspace too small (AdamWorkspaceBytes)");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const Ws w = Layout(workspace, list.num_chunks);
  if (list.num_chunks > 0) {
    GradCheckKernel<<<GridFor(list.num_chunks), kThreads, 0, s>>>(list.device_block, list.num_tensors,
                                                                   list.num_chunks, loss_scale, w.part, w.flag);
    CheckLaunch("MultiTensorGradCheck");
  }
  GradFinalizeKernel<<<1, 1024, 0, s>>>(list.num_chunks, w.part, w.flag, w.total, found_inf, grad_norm);
  CheckLaunch("MultiTensorGradCheck finalize");
}

void MultiTensorAdamUpdate(const AdamList& list, const AdamHyper& h, const float* loss_scale, const int64_t* step,
                           const int* found_inf, const void* workspace, size_t workspace_bytes, void* stream) {
  Require(step && found_inf, "MultiTensorAdamUpdate: null step or found_inf");
  Require(workspace && workspace_bytes >= AdamWorkspaceBytes(list.num_chunks),
          "MultiTensorAdamUpdate: workspace too small (AdamWorkspaceBytes)");
  Require(h.lr_schedule == 0 || h.lr_schedule == 1 || h.lr_schedule == 2, "MultiTensorAdamUpdate: bad lr_schedule");
  if (list.num_chunks == 0) return;
  Require(list.device_block != nullptr, "MultiTensorAdamUpdate: null device block");
  UpdateArgs u;
  u.lr = h.lr;
  u.beta1 = h.beta1;
  u.beta2 = h.beta2;
  u.eps = h.eps;
  u.wd = h.weight_decay;
  u.max_norm = h.max_grad_norm;
  u.lr_device = h.lr_device;
  u.lr_device_f64 = h.lr_device_f64;
  u.schedule = h.lr_schedule;
  u.adamw = h.adamw;
  u.warmup = h.warmup;
  u.total = h.total_steps;
  const Ws w = Layout(const_cast<void*>(workspace), list.num_chunks);
  AdamUpdateKernel<<<GridFor(list.num_chunks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      list.device_block, list.num_tensors, list.num_chunks, u, loss_scale, step, found_inf, w.total);
  CheckLaunch("MultiTensorAdamUpdate");
}

void FinishOptimizerStep(const int* found_inf, int64_t* step, const LossScaleState& ls, void* stream) {
  Require(found_inf != nullptr, "FinishOptimizerStep: null found_inf");
  const bool dynamic = ls.dynamic && ls.scale;
  if (dynamic) Require(ls.good && ls.bad, "FinishOptimizerStep: a dynamic loss scale needs the good/bad counters");
  FinishKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(found_inf, step, ls.scale, ls.good, ls.bad, dynamic,
                                                               ls.growth, ls.backoff, ls.min_scale,
                                                               ls.growth_interval, ls.overflows);
  CheckLaunch("FinishOptimizerStep");
}

void MultiTensorAdamStep(const AdamList& list, const AdamHyper& h, const LossScaleState& ls, int64_t* step,
                         int* found_inf, float* grad_norm, void* workspace, size_t workspace_bytes, void* stream) {
  MultiTensorGradCheck(list, ls.scale, found_inf, grad_norm, workspace, workspace_bytes, stream);
  MultiTensorAdamUpdate(list, h, ls.scale, step, found_inf, workspace, workspace_bytes, stream);
  FinishOptimizerStep(found_inf, step, ls, stream);
}

// ---- Statistics: L2 norm of the parameters and the share of exactly-zero gradient elements -----------------------
namespace {
__global__ void StatsChunkKernel(const void* block, int num, int64_t chunks, double* part_sq, long long* part_zero) {
  __shared__ double sh[33];
  __shared__ long long shz[33];
  const AdamTensor* ts = static_cast<const AdamTensor*>(block);
  const int64_t* off = reinterpret_cast<const int64_t*>(static_cast<const char*>(block) + TensorBytes(num));
  for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int t = FindTensor(off, num, c);
    const AdamTensor& a = ts[t];
    const int64_t lo = (c - off[t]) * kAdamChunk, hi = lo + kAdamChunk < a.n ? lo + kAdamChunk : a.n;
    double s = 0;
    long long z = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      const double p = static_cast<double>(a.param[i]);
      s += p * p;
      z += LoadGrad(a.grad, a.grad_type, i) == 0.0 ? 1 : 0;
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
    if (zero_fraction) *zero_fraction = total ? static_cast<float>(static_cast<double>(z) / static_cast<double>(total)) : 0.f;
  }
}
}  // namespace

size_t MultiTensorStatsWorkspaceBytes(int64_t num_chunks) {
  const size_t c = static_cast<size_t>(num_chunks > 0 ? num_chunks : 1);
  return Align256(c * 8) * 2;
}

void MultiTensorStats(const AdamList& list, int64_t total_elements, float* param_norm, float* zero_fraction,
                      void* workspace, size_t workspace_bytes, void* stream) {
  Require(list.num_chunks == 0 || list.device_block, "MultiTensorStats: null device block");
  Require(workspace && workspace_bytes >= MultiTensorStatsWorkspaceBytes(list.num_chunks),
          "MultiTensorStats: workspace too small (MultiTensorStatsWorkspaceBytes)");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const size_t c = static_cast<size_t>(list.num_chunks > 0 ? list.num_chunks : 1);
  double* part_sq = static_cast<double*>(workspace);
  long long* part_zero = reinterpret_cast<long long*>(static_cast<char*>(workspace) + Align256(c * 8));
  if (list.num_chunks > 0) {
    StatsChunkKernel<<<GridFor(list.num_chunks), kThreads, 0, s>>>(list.device_block, list.num_tensors,
                                                                    list.num_chunks, part_sq, part_zero);
    CheckLaunch("MultiTensorStats");
  }
  StatsFinalizeKernel<<<1, kThreads, 0, s>>>(list.num_chunks, part_sq, part_zero, total_elements, param_norm,
                                             zero_fraction);
  CheckLaunch("MultiTensorStats");
}

}  // namespace ot::cuda
