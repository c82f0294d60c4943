// Backward of cpu_ops/pool.h's max and average pooling over [N, C, spatial...] (1-D to 3-D), same geometry
// (PoolSpec: dilations, asymmetric pads, ceil-mode sizes, count_include_pad).
//   MaxPoolGrad: each window's dY goes to its argmax in X (the first maximum, as the forward picks it).
//   AvgPoolGrad: each window's dY / count is spread over the window's input elements.
// One task per (n, c) plane, sequential inside: deterministic. T = float or double.
#pragma once
#include "cpu_ops/pool.h"

namespace ot::cpu {

// relu: x is a Relu's output R and dx the gradient of the Relu's input (ReluGrad folded in, passes/fuse_pool_relu.h):
// a window's dY goes to its argmax only where x there is > 0 -- the same bits as ReluGrad(MaxPoolGrad(dy, x), x).
template <typename T>
void MaxPoolGrad(const PoolSpec& spec, const T* dy, const T* x, T* dx, bool relu = false);
template <typename T>
void AvgPoolGrad(const PoolSpec& spec, const T* dy, T* dx);

// The same over channels-last dy, x, dx ([N, spatial..., C]; cpu_ops/pool_last.cc): the same windows, argmaxes and
// sums, per channel. T = float or double; MaxPoolGradLast also float16 and bfloat16 (widened, dX summed in float and
// rounded once).
template <typename T>
void MaxPoolGradLast(const PoolSpec& spec, const T* dy, const T* x, T* dx, bool relu = false);
template <typename T>
void AvgPoolGradLast(const PoolSpec& spec, const T* dy, T* dx);

}  // namespace ot::cpu
