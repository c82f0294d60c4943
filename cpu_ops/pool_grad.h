// Backward of cpu_ops/pool.h's max and average pooling over [N, C, spatial...] (1-D to 3-D), same geometry
// (PoolSpec: dilations, asymmetric pads, ceil-mode sizes, count_include_pad).
//   MaxPoolGrad: each window's dY goes to its argmax in X (the first maximum, as the forward picks it).
//   AvgPoolGrad: each window's dY / count is spread over the window's input elements.
// One task per (n, c) plane, sequential inside: deterministic. T = float or double.
#pragma once
#include "cpu_ops/pool.h"

namespace ot::cpu {

template <typename T>
void MaxPoolGrad(const PoolSpec& spec, const T* dy, const T* x, T* dx);
template <typename T>
void AvgPoolGrad(const PoolSpec& spec, const T* dy, T* dx);

}  // namespace ot::cpu
