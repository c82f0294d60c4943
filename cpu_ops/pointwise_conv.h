// A channels-last pointwise convolution (1x1 kernel, stride 1, no padding, dilation 1, one group) is a GEMM over the
// batch's pixels: X stored [N, spatial..., C_in] is the matrix [P, C_in] with P = N * prod(spatial), Y is [P, C_out],
// and ONNX's W [C_out, C_in, 1...] is [C_out, C_in] row-major. So
//   forward  Y  = X W^T (+ b)      data  dX = dY W      weights  dW = dY^T X
// run as oneDNN matmul primitives on the stored layouts. oneDNN's convolutions want W in a blocked layout of their
// own, a different one per direction, and hand dW back in one: three reorders of every weight each training step,
// which the matmuls do not need (they pack W's panels within the call, in cache).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "cpu_ops/conv.h"

namespace ot::cpu {

// Whether spec is such a convolution (any rank, f32 or bf16) and large enough that its weight reorders cost more than
// a GEMM on stored layouts loses: its W at least 1/16 of X and Y together (bench/RESULTS.md).
bool PointwiseGemmApplies(const ConvSpec& spec);

class PointwiseConvGemm {
 public:
  enum class Kind { kForward, kData, kWeights };
  // Throws NotNativeHalf where oneDNN has only a reference matmul for a half spec.type.
  PointwiseConvGemm(const ConvSpec& spec, Kind kind);
  ~PointwiseConvGemm();
  // kForward: (a, b, bias) = (X, W, B or null) -> out = Y. kData: (dY, W) -> dX. kWeights: (dY, X) -> dW.
  void Run(const void* a, const void* b, const void* bias, void* out) const;
  size_t workspace_bytes() const;  // the scratchpad this object owns
  std::string impl_name() const;   // oneDNN's, with " (pointwise GEMM)"

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace ot::cpu
