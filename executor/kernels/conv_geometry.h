// Convolution geometry from a node's attributes, shared by the CPU kernels (linalg.cc, linalg_quant.cc,
// internal_conv.cc) and the GPU's (executor/cuda/kernels_conv.cc), so both backends read group, strides, dilations,
// pads and auto_pad one way and refuse the same malformed nodes.
#pragma once
#include <cstdint>
#include <vector>

#include "cpu_ops/conv.h"
#include "executor/kernel_registry.h"

namespace ot {

// Dims stored channels-last, [N, spatial..., C], in the logical order [N, C, spatial...] that ConvSpec holds (the
// attribute channels_last = 1 of Conv, ConvGradData and ConvGradWeight: executor/kernels/linalg.cc).
inline std::vector<int64_t> ChannelsFirst(const std::vector<int64_t>& d) {
  if (d.size() < 3) return d;
  std::vector<int64_t> r{d[0], d.back()};
  r.insert(r.end(), d.begin() + 1, d.end() - 1);
  return r;
}

// Conv / ConvInteger: X = input xi, W = input wi, the optional bias = input bi (< 0: none); Y's dims from the plan.
cpu::ConvSpec BuildConvSpec(const KernelContext& ctx, int xi, int wi, int bi,
                            bool y_from_geometry = false);  // linalg.cc

// ConvGradData / ConvGradWeight: the forward convolution's geometry from X's, W's and dY's dims and the node's
// (copied) attributes; fails naming the node when they disagree, UnsupportedError beyond 3 spatial dims.
cpu::ConvSpec GradConvSpec(const KernelContext& ctx, const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                           const std::vector<int64_t>& y);  // internal_conv.cc

}  // namespace ot
