// fuse_layer_norm (pattern fusion, before the loss pass): layer normalization written out as ReduceMean / Sub /
// Pow / Sqrt / Div -> one LayerNormalization node.
//
// Rewrite (PyTorch < 2.0 at opset < 17 exports nn.LayerNorm this way):
//   mean = ReduceMean(x, axes)          d = Sub(x, mean)
//   var  = ReduceMean(Pow(d, 2), axes)  (or Mul(d, d))
//   y    = Div(d, Sqrt(Add(var, eps)))  [y = Mul(y, scale)] [y = Add(y, bias)]      (Mul/Add operands either order)
//   -> y = LayerNormalization(x, scale, bias) {axis = -k, epsilon = eps}
// where both ReduceMeans have keepdims = 1 and the same axes (attribute before opset 18, constant input from 18),
// and those axes are the last k axes of x (known rank). A missing scale becomes a Constant of ones (a Constant
// node, not an initializer: the autodiff pass would train an initializer); a missing bias is left out (ONNX's B
// is optional). A scale or bias is taken only when its dtype is x's and it broadcasts within the normalized dims
// (rank <= k), else the pattern ends before that Mul/Add. Only when every intermediate value (mean, d, the
// square, var, var + eps, its Sqrt, the Div and Mul results that feed on) has no consumer outside the pattern,
// is no graph output and no training state; Constant nodes left without a use are removed. y keeps its Value.
// Why: the decomposition's ReduceMean/Pow/Sqrt are AMP deny ops, so under --amp every LayerNorm input was copied to
// fp32 and its backward saved fp32 tensors; LayerNormalization is an infer op with fp32 statistics inside and its
// backward is the fused LayerNormGrad.
// ONNX has LayerNormalization from opset 17; in a model of a lower ai.onnx opset the fused node is
// ai.onnxtrain.LayerNormalization (opset 1), the same op under the internal domain, so the exported step loads
// again (see fuse_gelu.h).
#pragma once
#include "passes/pass.h"

namespace ot {

class FuseLayerNormPass : public Pass {
 public:
  std::string name() const override { return "fuse_layer_norm"; }
  bool Run(Graph& g) override;
  int fused() const { return fused_; }  // after Run: how many LayerNormalization nodes it made

 private:
  int fused_ = 0;
};

}  // namespace ot
