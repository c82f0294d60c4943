// Fused forward ops of onnx-train (domain ai.onnxtrain) that the pattern-fusion passes make:
//   MatMulBias(A, B, bias) {activation = "none" | "relu"} -> Y
//     Y = act(A B + bias): A [d0, ..., M, K] (rank >= 2), B [K, N] (one weight matrix shared by every leading
//     index), bias [N] broadcast along the last axis; A, B, bias and Y share one float dtype. The linear layer of
//     a transformer ([B, T, C] x [C, N] + [N]) and, with relu, of an MLP (passes/fuse_matmul_bias.h).
//     Gradient rule: graph/grad/fused_grad.cc; CPU kernel: executor/kernels/fused_linalg.cc.
//     AMP class allow, like MatMul and Gemm: A, B and the bias all go to half (oneDNN accumulates in fp32 inside).
// RegisterFusedLinalgOps registers the schema, then the gradient rule and the AMP class (an internal op with no entry in
// amp_table.cc's ONNX lists), so one registration call makes the op complete.
#include <string>

#include "graph/grad_context.h"
#include "graph/infer_util.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {

void RegisterMatMulBiasGrad(OpRegistry& r);  // graph/grad/fused_grad.cc

namespace {

void InferMatMulBias(InferContext& ctx) {
  const Shape& a = ctx.Require(0);
  const Shape& b = ctx.Require(1);
  const Shape& bias = ctx.Require(2);
  const DataType t = ctx.input_type(0);
  if (t != DataType::kUndefined && !IsFloat(t)) ctx.Fail("A must be a float tensor, got " + DataTypeName(t));
  for (int i = 1; i < 3; ++i) {
    const DataType u = ctx.input_type(i);
    if (t != DataType::kUndefined && u != DataType::kUndefined && u != t)
      ctx.Fail(std::string(i == 1 ? "B" : "bias") + " (" + DataTypeName(u) + ") and A (" + DataTypeName(t) +
               ") differ in dtype");
  }
  const std::string act = ctx.node.attr_string("activation", "none");
  if (act != "none" && act != "relu") ctx.Fail("activation = '" + act + "' (none or relu)");
  if (a.known_rank() && a.rank() < 2) ctx.Fail("A must have rank >= 2, got " + a.ToString());
  if (b.known_rank() && b.rank() != 2) ctx.Fail("B must be 2-D [K, N], got " + b.ToString());
  if (bias.known_rank() && bias.rank() != 1) ctx.Fail("bias must be 1-D [N], got " + bias.ToString());
  if (a.known_rank() && b.known_rank()) {
    const Dim& k = a[a.rank() - 1];
    if (k.is_static() && b[0].is_static() && k.value != b[0].value)
      ctx.Fail("inner dimensions differ: A " + a.ToString() + ", B " + b.ToString());
  }
  if (b.known_rank() && bias.known_rank() && b[1].is_static() && bias[0].is_static() && b[1].value != bias[0].value)
    ctx.Fail("bias " + bias.ToString() + " does not match N of B " + b.ToString());
  if (!a.known_rank()) {
    ctx.set_output(0, t, Shape());
    return;
  }
  std::vector<Dim> y(a.dims().begin(), a.dims().end() - 1);
  y.push_back(b.known_rank() ? b[1] : bias.known_rank() ? bias[0] : Dim());
  ctx.set_output(0, t, Shape(y));
}

}  // namespace

void RegisterFusedLinalgOps(OpRegistry& r) {
  OpSchema mb;
  mb.op_type = "MatMulBias";
  mb.domain = kInternalDomain;
  mb.infer = InferMatMulBias;
  r.Register(mb);
  RegisterMatMulBiasGrad(r);
  r.SetAmp(kInternalDomain, "MatMulBias", AmpClass::kAllow);
}

}  // namespace ot
