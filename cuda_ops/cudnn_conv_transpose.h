// Transposed convolution (ONNX ConvTranspose forward) on the GPU through cuDNN (cudnn_conv.h), NCHW layouts:
//   X [N, C_in, in...], W [C_in, C_out/group, k...], Y [N, C_out, out...], bias [C_out],
//   Y[n, co, o] = sum over ci in co's group, i, j with o = i * stride - pad_begin + j * dilation of X[n, ci, i] W[ci,
//   co', j]
// (+ bias[co]). That is the adjoint of the convolution C with the same W, strides, dilations and group mapping a
// Y-shaped tensor [N, C_out, ...] to an X-shaped one [N, C_in, ...] -- C's filter layout [K = C_in, C = C_out/group,
// k...] is W's as it is -- so Y = C^T X is cuDNN's convolution backward-data with dy = X, dx = Y.
//
// Lowering (LowerConvTranspose). ONNX's pads: pad_begin >= 0 rows cropped at the start, pad_end rows cropped at the
// end; pad_end here is ONNX's pad_end minus output_padding (graph/ops/linalg_util.h ConvTransposeAxis), negative
// when output_padding / output_shape adds rows that no input reaches (they get only the bias). So per spatial dim
//   out = (in - 1) * stride + (k - 1) * dilation + 1 - pad_begin - pad_end.
//  * direct: when 0 <= pad_begin - pad_end < stride on every dim, C with cuDNN's symmetric pad = pad_begin maps
//    `out` rows to exactly `in` rows (floor((out + 2 pad_begin - ext) / stride) + 1 = in), every window starts
//    where ConvTranspose puts its inputs, and rows C reads as padding (past out) are those ConvTranspose crops;
//    rows no window reaches (pad_end < 0) come out of backward-data as 0. cuDNN writes Y directly. PyTorch's
//    exports (symmetric pads, output_padding < stride) all take this path.
//  * cropped: otherwise (SAME_UPPER's larger end pad, output_shape beyond a stride of extra rows, ...): backward-data
//    of C with no padding into the full uncropped output, full = (in - 1) * stride + ext per dim, in the workspace;
//    then Y = that full tensor's window starting at pad_begin (a strided copy, strided_copy.h), zero past its end.
// The bias (when given) is added to Y afterwards by the convolution's bias kernel (fp32 sum, rounded once).
//
// Precision, algorithm choice, determinism and the workspace limit are cudnn_conv.h's (ConvPass::kBackwardData).
// Plain host C++ over device pointers and a stream (void* = cudaStream_t); no IR types. Errors: std::invalid_argument
// for a malformed desc or null pointers, std::runtime_error when cuDNN has no algorithm or fails.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_ops/cudnn_conv.h"

namespace ot::cuda {

struct ConvTransposeDesc {
  FloatType type = FloatType::kF32;  // X, W, Y, bias
  bool tf32 = false;                 // as ConvDesc::tf32
  bool deterministic = false;        // as ConvDesc::deterministic
  int64_t n = 0, c_in = 0, c_out = 0, group = 1;
  // One value per spatial dim (1 to 3); pad_begin >= 0; pad_end may be negative (see above).
  std::vector<int64_t> in_spatial, out_spatial, kernel, strides, dilations, pad_begin, pad_end;
};

std::string ToString(const ConvTransposeDesc& d);

// Host-only. Throws std::invalid_argument when the desc is malformed: sizes not positive, vectors of different
// lengths, channels not divisible by group, pad_begin < 0, out_spatial not the formula above.
void ValidateConvTranspose(const ConvTransposeDesc& d);

// The adjoint convolution cuDNN runs (host-only; the desc must be valid). cropped: backward-data writes the full
// tensor [N, C_out, full...] into the workspace and a crop makes Y; else it writes Y.
struct ConvTransposeLowering {
  ConvDesc conv;  // conv.in_spatial: out (direct) or full (cropped); conv.out_spatial: in
  bool cropped = false;
  std::vector<int64_t> full_spatial;  // cropped only
};
ConvTransposeLowering LowerConvTranspose(const ConvTransposeDesc& d);

// Host-only. "" when the (valid) desc runs here, else why not (from the lowered convolution: 4-D and up, tensors of
// 2^31 elements or more).
std::string ConvTransposeUnsupportedReason(const ConvTransposeDesc& d);

// Workspace bytes of ConvTransposeForward (cuDNN's backward-data workspace, plus the full tensor when cropped;
// chooses and caches the algorithm: needs a GPU).
size_t ConvTransposeWorkspaceBytes(const ConvTransposeDesc& d);

// y = ConvTranspose(x, w) (+ bias[c_out] when bias is not null); every element of y written.
void ConvTransposeForward(const ConvTransposeDesc& d, const void* x, const void* w, const void* bias, void* y,
                          void* workspace, size_t workspace_bytes, void* stream);

}  // namespace ot::cuda
