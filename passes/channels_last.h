// channels_last (step graph, CPU, before autodiff): a CNN's activations stored [N, H, W, C] from layer to layer, so
// oneDNN's convolutions run on them directly instead of reordering NCHW in and out of every call (15-25% of a CNN's
// step; bench/RESULTS.md).
//
// The forward graph is rewritten in topological order. Nodes that run channels-last:
//   - layout ops on rank-4 float activations: Conv (not ConvTranspose), BatchNormalization, MaxPool (no Indices),
//     AveragePool -- each gets the attribute channels_last = 1 (their kernels, gradient rules and gradient ops
//     carry it: cpu_ops/conv.h, norm.h, pool.h); GlobalAveragePool becomes ReduceMean over axes 1, 2 (keepdims);
//   - ops that do not care where the channels are, when one of their rank-4 inputs is already channels-last:
//     element-wise ones (unary; binary and variadic with every other operand rank-4, a scalar, or of a static shape
//     of lower rank, which a Reshape to rank 4 and a Transpose re-lay out), Concat, Slice with known axes (its
//     starts and ends as they are), and ReduceMean/ReduceSum/ReduceMax with keepdims (axes remapped) or without
//     it where the kept axes come out in the same order (a mean over H, W: [N, C] either way);
//   - ShuffleNet's channel shuffle, Reshape [N, g, C/g, H, W] -> Transpose(0,2,1,3,4) -> Reshape back, becomes
//     Reshape [N, H, W, g, C/g] -> Transpose(0,1,2,4,3) -> Reshape; GroupNorm with one group (PoolFormer's:
//     Reshape [N, 1, -1] -> InstanceNormalization -> Reshape back) reads the NHWC value as it is, the whole image
//     normalized either way; and a Shape of a channels-last value reads it, its dims gathered back to NCHW order (so
//     the NCHW value is not made for it).
// A node's rank-4 data input that is not channels-last gets a Transpose(perm 0,2,3,1) (one per value); a
// channels-last value read by any other node, or a graph output, keeps its name and NCHW shape through a
// Transpose(perm 0,3,1,2) of the new channels-last value. Autodiff then differentiates the rewritten graph (the
// Transposes' gradients are Transposes). Values of unknown rank, float64 models and graphs without a Conv are left
// alone. Off with --disable-pass channels_last; the GPU's steps never take it (StepOptions::channels_last).
#pragma once
#include "passes/pass.h"

namespace ot {

class ChannelsLastPass : public Pass {
 public:
  std::string name() const override { return "channels_last"; }
  bool Run(Graph& g) override;
  int converted() const { return converted_; }    // nodes that now run channels-last
  int transposes() const { return transposes_; }  // Transposes added at the region's edges

 private:
  int converted_ = 0, transposes_ = 0;
};

}  // namespace ot
