// fuse_matmul_bias (pattern fusion, before the loss pass): a linear layer written as MatMul + Add (+ Relu) -> one
// GEMM with its bias (and ReLU) inside.
//
// Rewrite (A float of known rank >= 2, B a 2-D [K, N] value of A's dtype, bias a 1-D [N] value of A's dtype -- an
// initializer, a parameter or any computed value: gradients flow to it; the Add's operands in either order):
//   y = Add(MatMul(A, B), bias)
//     A 2-D, bias [N] or [1, N]      -> y = Gemm(A, B, bias)                       (alpha = beta = 1, no transposes)
//     A [d0, ..., M, K], rank > 2    -> y = ai.onnxtrain.MatMulBias(A, B, bias) {activation = "none"}
//   y = Relu(Add(MatMul(A, B), bias)) -> y = ai.onnxtrain.MatMulBias(A, B, bias) {activation = "relu"}  (any rank)
// (Gemm has no activation, so a 2-D layer followed by ReLU becomes MatMulBias too: one kernel and, in the
// backward, the ReLU mask taken from the saved output instead of a separate Relu/ReluGrad pair.)
// Conditions: the MatMul output has no consumer but the Add, the Add output none but the Relu when one is folded;
// neither is a graph output or training state; N of B and of the bias are equal (static, or the same symbol).
// y keeps its Value (name, type, shape); A, B and the bias keep their other uses. The new node is named after the
// MatMul's scope ("/fc1/MatMul" -> "/fc1/Gemm").
// Why: MatMul + Add stores the GEMM result and reads it again for the Add (and again for the Relu); the fused
// kernel writes y once (bias prefilled into the output and accumulated by oneDNN's matmul, ReLU applied in the
// same cache pass) and its backward sums dY for the bias instead of reducing a broadcast Add's gradient.
// Gemm exists at every opset; MatMulBias is ai.onnxtrain (opset 1; graph/ops/internal_fused.cc).
#pragma once
#include "passes/pass.h"

namespace ot {

class FuseMatMulBiasPass : public Pass {
 public:
  std::string name() const override { return "fuse_matmul_bias"; }
  bool Run(Graph& g) override;
  int gemms() const { return gemms_; }                  // after Run: MatMul + Add -> Gemm rewrites
  int matmul_biases() const { return matmul_biases_; }  // ... -> MatMulBias rewrites (with or without ReLU)

 private:
  int gemms_ = 0, matmul_biases_ = 0;
};

}  // namespace ot
