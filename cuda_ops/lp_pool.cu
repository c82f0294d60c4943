// Lp pooling: see lp_pool.h. Geometry is padded to 3-D (leading spatial dims of size 1, kernel 1, stride 1, no pad)
// so one pair of kernels serves 1-D to 3-D.
#include <cuda_runtime.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include "cuda_ops/launch_util.cuh"
#include "cuda_ops/lp_pool.h"
#include "kernel_common/half.h"

namespace ot::cuda {

namespace {

using detail::BlockSum;
using detail::CheckLaunch;
using detail::DispatchFloat;
using detail::FromD;
using detail::LdD;
using detail::Require;

constexpr int kThreads = 256;          // both kernels; a multiple of 32 (BlockSum)
constexpr int64_t kBlockWindow = 256;  // windows of at least this many elements: one block per output
constexpr int64_t kMaxGrid = int64_t{1} << 20;

struct LpArgs {
  int64_t total;  // outputs: planes * out[0] * out[1] * out[2]
  int64_t in[3], out[3], k[3], s[3], dl[3], pb[3];
  int64_t window;  // k[0] * k[1] * k[2]
  int p;
};

// |v|^p in double: the CPU's terms (p = 1, 2 spelled out; larger p by repeated squaring, within an ulp or two of
// the CPU's std::pow -- far below the rounding to the output type).
__device__ __forceinline__ double Term(double v, int p) {
  const double a = fabs(v);
  if (p == 1) return a;
  if (p == 2) return a * a;
  double r = 1.0, b = a;
  for (int e = p; e > 0; e >>= 1) {
    if (e & 1) r *= b;
    b *= b;
  }
  return r;
}
__device__ __forceinline__ double Root(double sum, int p) {
  return p == 1 ? sum : p == 2 ? sqrt(sum) : pow(sum, 1.0 / static_cast<double>(p));
}

// The output's plane and the first input coordinate of its window on each axis (may be negative: padding).
struct Window {
  int64_t plane, start[3];
};
__device__ __forceinline__ Window Locate(const LpArgs& a, int64_t o) {
  Window w;
  const int64_t ow = o % a.out[2];
  o /= a.out[2];
  const int64_t oh = o % a.out[1];
  o /= a.out[1];
  const int64_t od = o % a.out[0];
  w.plane = o / a.out[0];
  w.start[0] = od * a.s[0] - a.pb[0];
  w.start[1] = oh * a.s[1] - a.pb[1];
  w.start[2] = ow * a.s[2] - a.pb[2];
  return w;
}

// One thread per output; the window summed in the CPU's order (kd, kh, kw), positions outside the input skipped.
template <typename T>
__global__ void LpPoolThreadKernel(const T* __restrict__ x, T* __restrict__ y, LpArgs a) {
  const int64_t plane_size = a.in[0] * a.in[1] * a.in[2];
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < a.total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Window w = Locate(a, o);
    const T* xp = x + w.plane * plane_size;
    double sum = 0.0;
    for (int64_t kd = 0; kd < a.k[0]; ++kd) {
      const int64_t id = w.start[0] + kd * a.dl[0];
      if (id < 0 || id >= a.in[0]) continue;
      for (int64_t kh = 0; kh < a.k[1]; ++kh) {
        const int64_t ih = w.start[1] + kh * a.dl[1];
        if (ih < 0 || ih >= a.in[1]) continue;
        const int64_t row = (id * a.in[1] + ih) * a.in[2];
        for (int64_t kw = 0; kw < a.k[2]; ++kw) {
          const int64_t iw = w.start[2] + kw * a.dl[2];
          if (iw < 0 || iw >= a.in[2]) continue;
          sum += Term(LdD(xp, row + iw), a.p);
        }
      }
    }
    y[o] = FromD<T>(Root(sum, a.p));
  }
}

// One block per output: thread t sums window elements t, t + blockDim, ... (flat window order), then BlockSum's
// fixed tree. The loop over outputs is uniform across the block (it depends on blockIdx only), as BlockSum's
// barriers need.
template <typename T>
__global__ void LpPoolBlockKernel(const T* __restrict__ x, T* __restrict__ y, LpArgs a) {
  __shared__ double sh[33];
  const int64_t plane_size = a.in[0] * a.in[1] * a.in[2];
  for (int64_t o = blockIdx.x; o < a.total; o += gridDim.x) {
    const Window w = Locate(a, o);
    const T* xp = x + w.plane * plane_size;
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < a.window; j += blockDim.x) {
      const int64_t kw = j % a.k[2], t = j / a.k[2];
      const int64_t kh = t % a.k[1], kd = t / a.k[1];
      const int64_t id = w.start[0] + kd * a.dl[0], ih = w.start[1] + kh * a.dl[1], iw = w.start[2] + kw * a.dl[2];
      if (id < 0 || id >= a.in[0] || ih < 0 || ih >= a.in[1] || iw < 0 || iw >= a.in[2]) continue;
      sum += Term(LdD(xp, (id * a.in[1] + ih) * a.in[2] + iw), a.p);
    }
    sum = BlockSum(sum, sh);
    if (threadIdx.x == 0) y[o] = FromD<T>(Root(sum, a.p));
  }
}

std::string VecStr(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  s += ']';
  return s;
}

}  // namespace

std::string ToString(const LpPoolDesc& d) {
  std::ostringstream s;
  s << "LpPoolDesc{"
    << (d.type == FloatType::kF32   ? "f32"
        : d.type == FloatType::kF16 ? "f16"
                                    : "bf16")
    << " p=" << d.p << " n=" << d.n << " c=" << d.c << " in=" << VecStr(d.in_spatial)
    << " out=" << VecStr(d.out_spatial) << " kernel=" << VecStr(d.kernel) << " strides=" << VecStr(d.strides)
    << " dilations=" << VecStr(d.dilations) << " pads=" << VecStr(d.pad_begin) << VecStr(d.pad_end) << "}";
  return s.str();
}

void ValidateLpPool(const LpPoolDesc& d) {
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument("ot::cuda::LpPool: " + why + " in " + ToString(d));
  };
  const size_t r = d.in_spatial.size();
  if (r == 0 || r > 3) bad("1 to 3 spatial dims are supported");
  for (const auto* v : {&d.out_spatial, &d.kernel, &d.strides, &d.dilations, &d.pad_begin, &d.pad_end})
    if (v->size() != r) bad("the spatial vectors have different lengths");
  if (d.n < 0 || d.c < 0) bad("negative n or c");
  if (d.p < 1 || d.p > (int64_t{1} << 30)) bad("p must be a positive integer");
  for (size_t i = 0; i < r; ++i) {
    if (d.in_spatial[i] < 0 || d.out_spatial[i] < 0) bad("a negative size");
    if (d.kernel[i] <= 0 || d.strides[i] <= 0 || d.dilations[i] <= 0)
      bad("kernel, strides and dilations must be positive");
    if (d.pad_begin[i] < 0 || d.pad_end[i] < 0) bad("negative padding");
  }
}

void LpPoolForward(const LpPoolDesc& d, const void* x, void* y, void* stream) {
  ValidateLpPool(d);
  int64_t total = d.n * d.c;
  for (int64_t o : d.out_spatial) total *= o;
  if (total == 0) return;
  Require(x && y, "ot::cuda::LpPoolForward: null pointer");
  LpArgs a{};
  a.total = total;
  a.p = static_cast<int>(d.p);
  const size_t r = d.in_spatial.size(), lead = 3 - r;
  for (size_t i = 0; i < 3; ++i) {
    const bool pad = i < lead;  // a leading axis of size 1 that 1-D / 2-D pooling does not have
    const size_t j = i - lead;
    a.in[i] = pad ? 1 : d.in_spatial[j];
    a.out[i] = pad ? 1 : d.out_spatial[j];
    a.k[i] = pad ? 1 : d.kernel[j];
    a.s[i] = pad ? 1 : d.strides[j];
    a.dl[i] = pad ? 1 : d.dilations[j];
    a.pb[i] = pad ? 0 : d.pad_begin[j];
  }
  a.window = a.k[0] * a.k[1] * a.k[2];
  const bool per_block = a.window >= kBlockWindow;
  const int64_t blocks = per_block ? total : (total + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
  DispatchFloat(d.type, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    if (per_block)
      LpPoolBlockKernel<T><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(xp, yp, a);
    else
      LpPoolThreadKernel<T><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(xp, yp, a);
  });
  CheckLaunch("LpPoolForward");
}

}  // namespace ot::cuda
