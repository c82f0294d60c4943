// Fused forward ops of onnx-train (domain ai.onnxtrain) that the pattern-fusion passes make:
//   MatMulBias(A, B, bias) {activation = "none" | "relu", trans_b = 0} -> Y
//     Y = act(A op(B) + bias): A [d0, ..., M, K] (rank >= 2), B [K, N] (one weight matrix shared by every leading
//     index; stored [N, K] when trans_b, as PyTorch keeps a Linear's weight), bias [N] broadcast along the last
//     axis; A, B, bias and Y share one float dtype. The linear layer of a transformer ([B, T, C] x [C, N] + [N])
//     and, with relu, of an MLP (passes/fuse_matmul_bias.h; trans_b from passes/fold_transpose.h).
//     Gradient rule: graph/grad/fused_grad.cc; CPU kernel: executor/kernels/fused_linalg.cc.
//     AMP class allow, like MatMul and Gemm: A, B and the bias all go to half (oneDNN accumulates in fp32 inside).
//   MatMulTrans(A, B) {trans_a = 0, trans_b = 0} -> Y
//     Y = op(A) op(B), numpy-batched as MatMul: A [..., M, K] (stored [..., K, M] when trans_a), B [..., K, N]
//     (stored [..., N, K] when trans_b), both of rank >= 2, leading dims broadcast. What MatMul over a Transpose of
//     its operands' last two axes becomes (passes/fold_transpose.h), so the GEMM reads the operand in place instead
//     of a transposed copy. Made after autodiff: it has no gradient rule. AMP class allow, like MatMul.
//   GemmSum(A, B) {transA, transB, alpha = 1, sum_input = 0 | 1} -> Y, S
//     Y = alpha op(A) op(B) (Gemm without C, 2-D operands) and S = the column sums of input `sum_input` as stored:
//     the matrix stored [K, X] whose K axis the product reduces (A with transA = 1: S [M]; B with transB = 0: S [N]).
//     A Linear layer's weight gradient and bias gradient in one kernel (passes/fuse_bias_grad.h): on the GPU the
//     sum is cuBLASLt's bias-gradient epilogue. Made after autodiff: no gradient rule. AMP class allow.
// RegisterFusedLinalgOps registers the schema, then the gradient rule and the AMP class (an internal op with no entry
// in amp_table.cc's ONNX lists), so one registration call makes the op complete.
#include <algorithm>
#include <string>
#include <vector>

#include "graph/graph.h"
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
  const bool tb = ctx.node.attr_int("trans_b", 0) != 0;
  if (a.known_rank() && a.rank() < 2) ctx.Fail("A must have rank >= 2, got " + a.ToString());
  if (b.known_rank() && b.rank() != 2)
    ctx.Fail(std::string("B must be 2-D ") + (tb ? "[N, K]" : "[K, N]") + ", got " + b.ToString());
  if (bias.known_rank() && bias.rank() != 1) ctx.Fail("bias must be 1-D [N], got " + bias.ToString());
  const int kb = tb ? 1 : 0, nb = 1 - kb;  // B's K and N axes
  if (a.known_rank() && b.known_rank()) {
    const Dim& k = a[a.rank() - 1];
    if (k.is_static() && b[kb].is_static() && k.value != b[kb].value)
      ctx.Fail("inner dimensions differ: A " + a.ToString() + ", B " + b.ToString() + (tb ? " (trans_b)" : ""));
  }
  if (b.known_rank() && bias.known_rank() && b[nb].is_static() && bias[0].is_static() && b[nb].value != bias[0].value)
    ctx.Fail("bias " + bias.ToString() + " does not match N of B " + b.ToString() + (tb ? " (trans_b)" : ""));
  if (!a.known_rank()) {
    ctx.set_output(0, t, Shape());
    return;
  }
  std::vector<Dim> y(a.dims().begin(), a.dims().end() - 1);
  y.push_back(b.known_rank() ? b[nb] : bias.known_rank() ? bias[0] : Dim());
  ctx.set_output(0, t, Shape(y));
}

// The dtype of A, checked to be a float type that B shares (undefined while unknown).
DataType FloatOperands(InferContext& ctx) {
  const DataType t = ctx.input_type(0);
  if (t != DataType::kUndefined && !IsFloat(t)) ctx.Fail("A must be a float tensor, got " + DataTypeName(t));
  if (t != DataType::kUndefined && ctx.input_type(1) != DataType::kUndefined && ctx.input_type(1) != t)
    ctx.Fail("B (" + DataTypeName(ctx.input_type(1)) + ") and A (" + DataTypeName(t) + ") differ in dtype");
  return t;
}

void InferMatMulTrans(InferContext& ctx) {
  const Shape& a = ctx.Require(0);
  const Shape& b = ctx.Require(1);
  const DataType t = FloatOperands(ctx);
  const bool ta = ctx.node.attr_int("trans_a", 0) != 0, tb = ctx.node.attr_int("trans_b", 0) != 0;
  if (a.known_rank() && a.rank() < 2) ctx.Fail("A must have rank >= 2, got " + a.ToString());
  if (b.known_rank() && b.rank() < 2) ctx.Fail("B must have rank >= 2, got " + b.ToString());
  if (!a.known_rank() || !b.known_rank()) {
    ctx.set_output(0, t, Shape());
    return;
  }
  const int ra = a.rank(), rb = b.rank();
  const Dim& m = a[ta ? ra - 1 : ra - 2];
  const Dim& ka = a[ta ? ra - 2 : ra - 1];
  const Dim& kb = b[tb ? rb - 1 : rb - 2];
  const Dim& n = b[tb ? rb - 2 : rb - 1];
  if (ka.is_static() && kb.is_static() && ka.value != kb.value)
    ctx.Fail("inner dimensions differ: A " + a.ToString() + (ta ? " (trans_a)" : "") + ", B " + b.ToString() +
             (tb ? " (trans_b)" : ""));
  // Leading dims broadcast as numpy's (right-aligned).
  const int lead = std::max(ra, rb) - 2;
  std::vector<Dim> y(static_cast<size_t>(lead));
  for (int i = 0; i < lead; ++i) {
    const int ia = i - (lead - (ra - 2)), ib = i - (lead - (rb - 2));
    const Dim* da = ia >= 0 ? &a[ia] : nullptr;
    const Dim* db = ib >= 0 ? &b[ib] : nullptr;
    if (!da)
      y[i] = *db;
    else if (!db)
      y[i] = *da;
    else if (da->is_static() && da->value == 1)
      y[i] = *db;
    else if (db->is_static() && db->value == 1)
      y[i] = *da;
    else if (da->is_static() && db->is_static() && da->value != db->value)
      ctx.Fail("batch dims do not broadcast: A " + a.ToString() + ", B " + b.ToString());
    else
      y[i] = da->is_static() ? *da : *db;
  }
  y.push_back(m);
  y.push_back(n);
  ctx.set_output(0, t, Shape(y));
}

void InferGemmSum(InferContext& ctx) {
  const Shape& a = ctx.Require(0);
  const Shape& b = ctx.Require(1);
  const DataType t = FloatOperands(ctx);
  const bool ta = ctx.node.attr_int("transA", 0) != 0, tb = ctx.node.attr_int("transB", 0) != 0;
  const int64_t si = ctx.node.attr_int("sum_input", 0);
  if (si != 0 && si != 1) ctx.Fail("sum_input = " + std::to_string(si) + " (0 or 1)");
  if (si == 0 && !ta) ctx.Fail("sum_input 0 needs transA = 1 (A stored [K, M])");
  if (si == 1 && tb) ctx.Fail("sum_input 1 needs transB = 0 (B stored [K, N])");
  if ((a.known_rank() && a.rank() != 2) || (b.known_rank() && b.rank() != 2))
    ctx.Fail("A and B must be 2-D, got " + a.ToString() + " and " + b.ToString());
  if (!a.known_rank() || !b.known_rank()) {
    ctx.set_output(0, t, Shape());
    ctx.set_output(1, t, Shape());
    return;
  }
  const Dim& m = a[ta ? 1 : 0];
  const Dim& ka = a[ta ? 0 : 1];
  const Dim& kb = b[tb ? 1 : 0];
  const Dim& n = b[tb ? 0 : 1];
  if (ka.is_static() && kb.is_static() && ka.value != kb.value)
    ctx.Fail("inner dimensions differ: A " + a.ToString() + ", B " + b.ToString());
  ctx.set_output(0, t, Shape(std::vector<Dim>{m, n}));
  ctx.set_output(1, t, Shape(std::vector<Dim>{si == 0 ? m : n}));
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
  OpSchema mt;
  mt.op_type = "MatMulTrans";
  mt.domain = kInternalDomain;
  mt.infer = InferMatMulTrans;
  r.Register(mt);
  r.SetAmp(kInternalDomain, "MatMulTrans", AmpClass::kAllow);
  OpSchema gs;
  gs.op_type = "GemmSum";
  gs.domain = kInternalDomain;
  gs.infer = InferGemmSum;
  r.Register(gs);
  r.SetAmp(kInternalDomain, "GemmSum", AmpClass::kAllow);
}

}  // namespace ot
