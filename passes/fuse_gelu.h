// fuse_gelu (pattern fusion, before the loss pass): GELU written out as elementwise ops -> one Gelu node.
//
// Rewrite (x any float value; the Mul/Add operands in either order; constants are Constant nodes or initializers
// with one element, compared with relative tolerance 1e-6):
//   erf form   a = 1 + Erf(Div(x, sqrt 2) | Mul(x, 1/sqrt 2))                        -> Gelu(x)
//   tanh form  a = 1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))  (x^3 = Pow(x, 3) | x*x*x) -> Gelu(x, approximate=tanh)
//   then y = Mul(Mul(x, a), 0.5) | Div(Mul(x, a), 2) | Mul(Mul(x, 0.5), a) | Mul(x, Mul(a, 0.5))
//   (PyTorch 1.13 at opset < 20 writes Div(x, 1.4142135) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5)).
// Only when every intermediate value has that one consumer, is no graph output and no training state; the
// Constant nodes left without a use are removed. y keeps its Value (name, type, shape); x's other uses stay.
// Why: the decomposition's backward saves x and the Erf/Tanh terms in separate buffers and, under AMP, Erf's
// gradient uses Exp (a deny op), so GELU's backward ran in fp32; the fused Gelu has the one internal GeluGrad.
// ONNX has Gelu from opset 20. In a model of a lower ai.onnx opset the fused node is ai.onnxtrain.Gelu (opset 1),
// the same op under the internal domain (schema, gradient rule, kernel and AMP class are the ONNX Gelu's): an
// ai.onnx Gelu there (Node::opset 20 under an import of 15) would be exported by `onnx-train passes -o` into a
// step model that names an op its own opset lacks, which neither onnx-train nor the ONNX checker loads again.
#pragma once
#include "passes/pass.h"

namespace ot {

class FuseGeluPass : public Pass {
 public:
  std::string name() const override { return "fuse_gelu"; }
  bool Run(Graph& g) override;
  int fused() const { return fused_; }  // after Run: how many Gelu nodes it made

 private:
  int fused_ = 0;
};

}  // namespace ot
