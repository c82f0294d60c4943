// CPU kernel of ai.onnxtrain.GeluGrad(dY, X) {approximate} -> dX (schema and formulas: graph/grad/norm_grad.cc):
//   none: dX = dY * (Phi(x) + x phi(x)),  Phi(x) = (1 + erf(x / sqrt 2)) / 2,  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
//   tanh: dX = dY * ((1 + t) / 2 + x (1 - t^2) k (1 + 3 a x^2) / 2),  t = tanh(k (x + a x^3)), k = sqrt(2/pi),
//         a = 0.044715
// float64 computes in double, float32 in float; float16/bfloat16 are loaded into fp32 tiles (cpu_ops/half_convert.h),
// computed in fp32 and rounded once when stored, so a half GeluGrad is the fp32 one rounded.
// Element-wise over fixed blocks (deterministic: every element is computed alone, no reduction).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cpu_ops/half_convert.h"
#include "executor/kernel_registry.h"
#include "graph/graph.h"
#include "kernel_common/scalar_math.h"

namespace ot {

namespace {

// dX for n elements of A (float or double): kernel_common/scalar_math.h's formulas, the ones the fused-cluster
// interpreter runs, so a fused GeluGrad equals this kernel. Float's erf/exp/tanh are vec_math's (branch-free), so
// the float loops vectorize; compiled for AVX2 and the baseline (OT_VEC_CLONES, bit-identical results).
//
// The loops prefetch X and dY kPrefetchAhead elements ahead: the polynomials make each element long enough that the
// core keeps few loads in flight, and X -- the forward's saved activation, cold in memory -- arrived at ~3.5 GB/s
// inside a training step (perf: ~45% of the loop's samples on X's load). PoolFormer-S12 fp32: GeluGrad 26.9 -> 10.1
// ms a step (bench/RESULTS.md).
constexpr int64_t kPrefetchAhead = 256;  // 1 KB of floats

template <typename A, typename F>
OT_VEC_CLONES void PrefetchingLoop(const A* dy, const A* x, A* dx, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __builtin_prefetch(x + i + kPrefetchAhead);
    __builtin_prefetch(dy + i + kPrefetchAhead);
    for (int64_t j = i; j < i + 16; ++j) dx[j] = f(dy[j], x[j]);
  }
  for (; i < n; ++i) dx[i] = f(dy[i], x[i]);
}

template <typename A>
void GeluGradLoop(const A* dy, const A* x, A* dx, int64_t n, bool tanh_form) {
  if (tanh_form)
    PrefetchingLoop(dy, x, dx, n, [](A d, A v) { return math::GeluGradTanh(d, v); });
  else
    PrefetchingLoop(dy, x, dx, n, [](A d, A v) { return math::GeluGradErf(d, v); });
}

KernelInfo GeluGradKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(1).dtype;
  if (!IsFloat(t)) ctx.Unsupported("GeluGrad of " + DataTypeName(t));
  if (ctx.in(0).dtype != t)
    ctx.Fail("dY is " + DataTypeName(ctx.in(0).dtype) + " but X is " + DataTypeName(t) + " (one dtype expected)");
  if (ctx.in(0).dims != ctx.in(1).dims) ctx.Fail("dY and X differ in shape (GeluGrad does not broadcast)");
  const std::string approx = ctx.node.attr_string("approximate", "none");
  if (approx != "none" && approx != "tanh") ctx.Fail("approximate = '" + approx + "' (none or tanh)");
  const bool tanh_form = approx == "tanh";
  const int64_t n = ctx.in(0).numel();
  KernelInfo k;
  k.fn = [=](const KernelIO& io) {
    DispatchDType(t, [&](auto tag) {
      using T = decltype(tag);
      constexpr bool kHalf = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
      if constexpr (std::is_floating_point_v<T>) {
        const T* dy = io.In<T>(0);
        const T* x = io.In<T>(1);
        T* dx = io.Out<T>(0);
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 15), [&](const tbb::blocked_range<int64_t>& r) {
          GeluGradLoop<T>(dy + r.begin(), x + r.begin(), dx + r.begin(), r.end() - r.begin(), tanh_form);
        });
      } else if constexpr (kHalf) {
        const T* dy = io.In<T>(0);
        const T* x = io.In<T>(1);
        T* dx = io.Out<T>(0);
        // Blocks are whole tiles (1 << 15 is a multiple of kHalfTile), each tile converted into fp32 on the stack.
        tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 15), [&](const tbb::blocked_range<int64_t>& r) {
          float fdy[cpu::kHalfTile], fx[cpu::kHalfTile], fdx[cpu::kHalfTile];
          for (int64_t i = r.begin(); i < r.end(); i += cpu::kHalfTile) {
            const int64_t m = std::min<int64_t>(cpu::kHalfTile, r.end() - i);
            cpu::LoadFloats(dy + i, fdy, m);
            cpu::LoadFloats(x + i, fx, m);
            GeluGradLoop<float>(fdy, fx, fdx, m, tanh_form);
            cpu::StoreFloats(fdx, dx + i, m);
          }
        });
      }
    });
  };
  // dX[i] from dY[i] and X[i] only (GeluGradLoop; half: a tile of both is loaded before its dX tile is stored).
  AllowInPlace(k, ctx, 0, 0);
  AllowInPlace(k, ctx, 0, 1);
  return k;
}

}  // namespace

// Also the kernels of ai.onnxtrain.Gelu and ai.onnxtrain.LayerNormalization (the ONNX ops under the internal
// domain, for fused nodes in models of older opsets: graph/grad/norm_grad.cc): the ONNX kernels themselves, so this
// runs after the elementwise and norm families are registered.
void RegisterGeluGradKernels(KernelRegistry& r) {
  r.Register("GeluGrad", GeluGradKernel, kInternalDomain);
  for (const char* op : {"Gelu", "LayerNormalization"})
    if (const KernelFactory* f = r.Find("", op)) r.Register(op, KernelFactory(*f), kInternalDomain);
}

}  // namespace ot
