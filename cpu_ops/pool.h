// Pooling over [N, C, spatial...] (1-D, 2-D, 3-D): max (with optional int64 argmax indices), average
// (count_include_pad or not), Lp; dilations, asymmetric pads and ceil-mode output sizes are the caller's
// geometry. Hand-written loops: one task per (n, c) plane, deterministic.
#pragma once
#include <cstdint>
#include <vector>

namespace ot::cpu {

enum class PoolKind { kMax, kAvg, kLp };

struct PoolSpec {
  PoolKind kind = PoolKind::kMax;
  int64_t n = 0, c = 0;
  // All of length rank (1..3); dilations 1 = dense.
  std::vector<int64_t> in_spatial, out_spatial, kernel, strides, dilations, pad_begin, pad_end;
  bool count_include_pad = false;  // avg: divide by the window clipped to the padded input, else to the input
  int64_t p = 2;                   // Lp norm order
  bool indices_col_major = false;  // MaxPool storage_order = 1
};

// indices may be null. Index of an element = (n*C + c) * prod(in_spatial) + its offset within the plane
// (row-major, or column-major over the spatial dims when indices_col_major), as ONNX MaxPool specifies.
// A window with no element inside the input (only possible with pads >= kernel) yields the lowest value and
// index -1 (max) or 0 (avg, Lp). T is any arithmetic type or float16/bfloat16 (computed in float).
template <typename T>
void Pool(const PoolSpec& spec, const T* x, T* y, int64_t* indices);

// Max or average pooling of channels-last x, [N, spatial..., C] (the channels_last pass's layout; y the same way):
// Pool's values without indices (cpu_ops/pool_last.cc). T: float, double, float16, bfloat16.
template <typename T>
void PoolLast(const PoolSpec& spec, const T* x, T* y);

}  // namespace ot::cpu
