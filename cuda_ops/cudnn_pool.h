// Max and average pooling on the GPU with cuDNN (cudnnPoolingForward / cudnnPoolingBackward): 1-D to 3-D over
// X [N, C, in...] -> Y [N, C, out...], fp32/fp16/bf16 (averages summed in fp32 by cuDNN), NaN propagated by max (as
// cpu::Pool does: a NaN in a window is its max). Global pooling is a window over the whole input. 1-D runs as 2-D
// with a leading spatial dim of 1. Plain host C++ over device pointers and a stream (void* = cudaStream_t).
// bf16 (which the legacy pooling API does not document) runs as the CPU runs half pooling: the operands widened to
// fp32 in the workspace (exact), cuDNN's fp32 pooling, the result rounded once to bf16.
//
// Geometry cuDNN can express (PoolUnsupportedReason names the rest, so a caller can refuse before running):
//   - dilations 1 (cuDNN's pooling has none);
//   - padding: like cudnn_conv.h, the output size cuDNN computes with pad = pad_begin on both sides,
//       out = floor((in + 2 pad_begin - k) / stride) + 1,
//     must be the caller's (so ceil_mode runs when it gives the floor size, e.g. any window that tiles the input);
//     then windows start where ONNX's do; positions outside the input never win a max and are not counted by an
//     average that excludes padding;
//   - pad_begin < k, so every window holds an input element (the CPU's empty-window rule never applies);
//   - average including padding: cuDNN divides by the whole window k; ONNX (and cpu::Pool) by the window clipped
//     to the padded input [-pad_begin, in + pad_end). Equal when no window reaches past in + pad_end, which is
//     checked (it fails only with a pad_end smaller than pad_begin, or with ceil-mode windows).
//
// Backward. MaxPool's: cuDNN routes each dY to the argmax of its window, which it finds again by comparing X with
// Y; cpu::MaxPoolGrad takes the first maximum. On ties inside one window they may pick different elements (the sum
// of dX is the same); random data has none. The forward's Y is not an input of the IR's MaxPoolGrad, so it is
// recomputed into the workspace (PoolBackwardWorkspaceBytes). With `deterministic`, max pooling uses
// CUDNN_POOLING_MAX_DETERMINISTIC (overlapping windows then add into dX in a fixed order). AveragePool's backward
// spreads dY / count over each window; it reads neither X nor Y (cuDNN is handed dY and dx in their places).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_ops/row_kernels.h"  // FloatType

namespace ot::cuda {

enum class PoolMode { kMax, kAvgIncludePad, kAvgExcludePad };

struct PoolDesc {
  FloatType type = FloatType::kF32;
  PoolMode mode = PoolMode::kMax;
  bool deterministic = false;  // max: CUDNN_POOLING_MAX_DETERMINISTIC (backward adds in a fixed order)
  int64_t n = 0, c = 0;
  // One value per spatial dim (1 to 3): windows `kernel` every `strides`, starting at -pad_begin.
  std::vector<int64_t> in_spatial, out_spatial, kernel, strides, dilations, pad_begin, pad_end;
};

std::string ToString(const PoolDesc& d);

// Host-only. Throws std::invalid_argument for a malformed desc (non-positive sizes, vectors of different lengths,
// negative pads).
void ValidatePool(const PoolDesc& d);
// Host-only. "" when cuDNN can run the (valid) desc, else why not (see above).
std::string PoolUnsupportedReason(const PoolDesc& d);

// Workspace of PoolForward: the widened fp32 copies of X and Y for bf16, none for fp32/fp16.
size_t PoolForwardWorkspaceBytes(const PoolDesc& d);
// y = pool(x).
void PoolForward(const PoolDesc& d, const void* x, void* y, void* workspace, size_t workspace_bytes, void* stream);

// Workspace of PoolBackward: max pooling recomputes Y there (256-rounded); average needs none; bf16 adds the fp32
// copies of dY and dX (and of X for max).
size_t PoolBackwardWorkspaceBytes(const PoolDesc& d);
// dx = the gradient of the pooling with respect to x (written, not accumulated). x: the forward's input (max
// pooling; ignored, may be null, for averages).
void PoolBackward(const PoolDesc& d, const void* dy, const void* x, void* dx, void* workspace, size_t workspace_bytes,
                  void* stream);

}  // namespace ot::cuda
