// The weight gradient of a 2-D depthwise convolution (group = C_in = C_out, one filter per channel), for the shapes
// oneDNN 2.6 (Debian's) has no jit kernel for: it runs a 3x3 depthwise backward-weights call in jit_dw but a 5x5
// one (EfficientNet, MobileNetV3) in its gemm-based implementation, one tiny GEMM per channel (123 ms for
// EfficientNet-B0's 240-channel 28x28 layer at batch 4, where the arithmetic is 19M MACs).
//
//   dW[c, 0, kh, kw] = sum over n, oh, ow of dY[n, c, oh, ow] * X[n, c, oh*sh + kh - ph, ow*sw + kw - pw]
//
// NCHW float32 (the ONNX layouts). Per channel and image, the zero-padded input plane is cut into stride x stride
// phase planes and dY laid out at their width, so each tap is one contiguous dot product (taps that read one phase
// share the loads of dY), summed in eight float lanes, the lanes of each image added into a double per tap: the
// order is fixed by the shapes alone (deterministic for any thread count). Parallel over channels.
// Channels-last dY and X (ConvSpec::channels_last, whose oneDNN weight gradient is no better): per block of 64
// channels, each tap's products along the channels in float per image, the images added in double.
#pragma once
#include "cpu_ops/conv.h"

namespace ot::cpu {

// The spec is a 2-D depthwise convolution this kernel computes: group == c_in == c_out, dilations 1, forward
// (not transposed).
bool DepthwiseGradWeightApplies(const ConvSpec& spec);
void DepthwiseConvGradWeight(const ConvSpec& spec, const float* dy, const float* x, float* dw);

}  // namespace ot::cpu
