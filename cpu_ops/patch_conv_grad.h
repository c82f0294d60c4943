// The weight gradient of a patchify convolution (a vision transformer's patch embedding: 2-D, one group, kernel =
// stride, no padding or dilation, channels-last X and dY) as one GEMM over its patches:
//   dW[OC, C*KH*KW] = dY^T x P,  dY [N*OH*OW, OC] as stored, P [N*OH*OW, C*KH*KW] gathered from X,
// each patch a row in W's (c, kh, kw) order. oneDNN 2.6's AMX backward-weights kernel runs ViT-B/16's (3 input
// channels) at 47 GFLOP/s, a twelfth of its forward (bench/RESULTS.md, session 38). A 1x1 stride-1 convolution (a
// pointwise one) is a patchify one whose P is X itself: no gather then.
#pragma once
#include <memory>

#include "cpu_ops/conv.h"
#include "cpu_ops/matmul.h"

namespace ot::cpu {

bool PatchGradWeightApplies(const ConvSpec& s);

class PatchConvGradWeight {
 public:
  explicit PatchConvGradWeight(const ConvSpec& s);  // s.type: the operands' and dW's type
  // P, then the GEMM's own workspace.
  size_t workspace_bytes() const;
  size_t heap_bytes() const { return gemm_->heap_bytes(); }
  // dY [N, OH, OW, OC], X [N, H, W, C] -> dW [OC, C, KH, KW]; `workspace`: workspace_bytes(), 64-byte aligned.
  void Run(const void* dy, const void* x, void* dw, void* workspace) const;

 private:
  ConvSpec spec_;
  int64_t rows_ = 0, cols_ = 0;
  size_t es_ = 0, p_bytes_ = 0;
  bool direct_ = false;  // P is X (1x1 patches): the GEMM reads X
  std::shared_ptr<DnnlMatMul> gemm_;
};

}  // namespace ot::cpu
