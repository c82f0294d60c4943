// gradient_op: expands ONNX's ai.onnx.preview.training Gradient nodes into standard ops (and our internal
// backward ops) with the autodiff pass, so no kernel is needed for Gradient itself.
//
// Rewrite, for each Gradient{xs, zs, y}(x_1..x_n, z_1..z_m) -> (dy/dx_1..dy/dx_n):
//   the backward of y with respect to x_1..x_n is appended (AutodiffPass with y as the loss and every other float
//   initializer frozen; x_i that are graph inputs are made parameters for the pass only), and output i becomes
//   Identity(dy/dx_i). An x_i that y does not depend on gets zeros of its shape (ConstantOfShape(Shape(x_i))).
//   A non-scalar y is differentiated as ReduceSum(y) (a seed of ones, as ONNX Runtime does).
// Limits (UnsupportedError naming the node): the i-th input must be the value named xs[i] (resp. zs[i - n]) --
// feeding other values into the differentiated function is not supported; a z that depends on some x is not
// supported (the gradient would have to stop at z); graph-input x_i need static shapes.
// Run this before a plan is made, wherever a model is loaded to run (onnx-train check, run).
#pragma once
#include "passes/pass.h"

namespace ot {

class GradientOpPass : public Pass {
 public:
  std::string name() const override { return "gradient_op"; }
  bool Run(Graph& g) override;
};

// Runs GradientOpPass when the graph has a Gradient node; returns true when it changed the graph.
bool ExpandGradientOps(Graph& g);

}  // namespace ot
