// Convolution on the GPU with cuDNN's legacy API (cudnnConvolutionForward / BackwardData / BackwardFilter, in
// cuDNN 9's libcudnn_cnn): 1-D, 2-D and 3-D, groups, strides, dilations, zero padding, NCHW (ONNX) layouts:
//   X [N, C_in, in...], W [C_out, C_in/group, k...], Y [N, C_out, out...], bias [C_out].
// Plain host C++ over device pointers and a stream (void* = cudaStream_t); no IR types. 1-D runs as 2-D with a
// leading spatial dim of 1.
//
// Precision. fp32 tensors compute in fp32. Exact fp32 (tf32 = false) runs with CUDNN_FMA_MATH: cuDNN's
// CUDNN_DEFAULT_MATH permits TF32 tensor cores for fp32 data on Ampere and newer, so it is not exact fp32; tf32 =
// true (the backend's --tf32, which GEMMs follow too) runs with CUDNN_DEFAULT_MATH. fp16/bf16 tensors compute in
// fp32 (the convolution descriptor's compute type is CUDNN_DATA_FLOAT, never half accumulation) with
// CUDNN_TENSOR_OP_MATH (tensor cores; an algorithm without them reports CUDNN_DEFAULT_MATH and runs with that).
//
// Padding. The legacy API pads symmetrically (one pad per spatial dim). ONNX pads are begin/end pairs; a geometry
// runs here when it equals the symmetric one with pad = pad_begin: the output size cuDNN computes from pad_begin,
//   out = floor((in + 2 pad_begin - ((k - 1) dilation + 1)) / stride) + 1,
// must be the ONNX output size. Then every window starts where ONNX's does, and any position a window covers
// outside the input is zero in both (a larger pad_end than pad_begin that no window reaches changes nothing; a
// smaller one that the windows never cross either). ConvUnsupportedReason names a geometry that does not pass
// (SAME_UPPER with an even kernel, for one) so the caller can refuse it before anything runs.
//
// Algorithms. Per (desc, pass), cudnnGet*Algorithm_v7 (heuristics: no benchmarking, so the choice is the same on
// every run and costs no GPU time) returns candidates best first; the first one that succeeded, fits the workspace
// limit (ConvWorkspaceLimit) and, with `deterministic`, is CUDNN_DETERMINISTIC is taken. Its workspace size is
// asked again with cudnnGet*WorkspaceSize. The choice and its descriptors are cached per device and desc, so the
// executor can ask ConvWorkspaceBytes when a plan is made and each launch then only issues cuDNN's kernel. With
// `deterministic` every pass is bitwise repeatable (cuDNN's backward-filter and some backward-data algorithms
// otherwise accumulate with atomics).
//
// Errors: std::invalid_argument for a malformed desc or a null pointer, std::runtime_error when cuDNN has no
// algorithm or fails (the message names the desc and cuDNN's status; without a GPU, that there is none).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_ops/row_kernels.h"  // FloatType

namespace ot::cuda {

struct ConvDesc {
  FloatType type = FloatType::kF32;  // X, W, Y, bias (and their gradients)
  bool tf32 = false;                 // kF32: TF32 tensor cores allowed (see above); ignored for halves
  bool deterministic = false;        // only CUDNN_DETERMINISTIC algorithms
  int64_t n = 0, c_in = 0, c_out = 0, group = 1;
  // One value per spatial dim (1 to 3 of them); dilations 1 = dense; pads >= 0.
  std::vector<int64_t> in_spatial, out_spatial, kernel, strides, dilations, pad_begin, pad_end;
};

enum class ConvPass { kForward, kBackwardData, kBackwardFilter };

std::string ToString(const ConvDesc& d);
const char* ToString(ConvPass p);

// Host-only (no GPU needed). Throws std::invalid_argument when the desc is malformed: sizes not positive, vectors
// of different lengths, channels not divisible by group, out_spatial not ONNX's output size for the geometry.
void ValidateConv(const ConvDesc& d);
// Host-only. "" when cuDNN can run the (valid) desc, else why not: more than 3 spatial dims, padding the symmetric
// legacy API cannot express (see above), a dimension or tensor of 2^31 elements or more.
std::string ConvUnsupportedReason(const ConvDesc& d);

// The largest workspace an algorithm may ask for: 256 MiB (the fastest algorithms of large convolutions --
// FFT, Winograd -- need tens of MiB; the executor places it in the step's arena for this kernel only).
size_t ConvWorkspaceLimit();

// Bytes of workspace `pass` needs for this desc (chooses and caches the algorithm: needs a GPU).
size_t ConvWorkspaceBytes(const ConvDesc& d, ConvPass pass);
// Which algorithm `pass` uses (cuDNN's enum name, and the math type), for tests and logs.
std::string ConvAlgorithmName(const ConvDesc& d, ConvPass pass);
// Heuristic queries made so far in this process (one per cache miss), for tests of the cache.
int64_t ConvAlgorithmQueries();

// y = conv(x, w) (+ bias[c_out] broadcast over N and space, when bias is not null: a second pass over y, the sum in
// fp32 rounded once to the type, so a half y is rounded twice). The workspace must hold
// ConvWorkspaceBytes(d, kForward) bytes (null with 0 bytes when that is 0).
void ConvForward(const ConvDesc& d, const void* x, const void* w, const void* bias, void* y, void* workspace,
                 size_t workspace_bytes, void* stream);
// dx = the gradient of the forward convolution with respect to x (written, not accumulated).
void ConvBackwardData(const ConvDesc& d, const void* dy, const void* w, void* dx, void* workspace,
                      size_t workspace_bytes, void* stream);
// dw = the gradient with respect to w (written, not accumulated).
void ConvBackwardFilter(const ConvDesc& d, const void* dy, const void* x, void* dw, void* workspace,
                        size_t workspace_bytes, void* stream);

}  // namespace ot::cuda
