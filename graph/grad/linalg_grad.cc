// Gradient rules of MatMul and Gemm, as GEMMs of the output gradient with the other operand.
#include <algorithm>

#include "graph/grad/grad_rules.h"
#include "graph/grad/grad_util.h"
#include "graph/grad_context.h"
#include "graph/op_registry.h"

namespace ot {

namespace {
// Swaps the last two axes of a value of the given rank.
Value* SwapLast2(GradContext& c, Value* v, int rank) {
  std::vector<int64_t> perm(rank);
  for (int i = 0; i < rank; ++i) perm[i] = i;
  std::swap(perm[rank - 1], perm[rank - 2]);
  return c.Op("Transpose", {v}, {{"perm", Attribute::Ints(perm)}});
}
}  // namespace

void RegisterLinalgGrads(OpRegistry& r) {
  // Y = A B (numpy batched): dA = dY B^T, dB = A^T dY, each reduced over the batch dims it was broadcast along. A 1-D
  // operand is a matrix with a unit axis (A [K] -> [1, K], B [K] -> [K, 1]) whose axis Y lacks: dY gets it back, and
  // the operand's gradient loses it again.
  r.SetGrad("", "MatMul", [](GradContext& c) {
    const Shape& as = c.X(0)->shape;
    const Shape& bs = c.X(1)->shape;
    if (!as.known_rank() || !bs.known_rank()) c.Fail("operand ranks must be known");
    if (as.rank() < 1 || bs.rank() < 1) c.Fail("MatMul of a scalar");
    const bool a1 = as.rank() == 1, b1 = bs.rank() == 1;
    Value* a = a1 ? grad::UnsqueezeAxes(c, c.X(0), {0}) : c.X(0);
    Value* b = b1 ? grad::UnsqueezeAxes(c, c.X(1), {1}) : c.X(1);
    const int ar = a1 ? 2 : as.rank(), br = b1 ? 2 : bs.rank();
    Value* dy = c.dY(0);
    const int yr = std::max(ar, br);  // the rank of A B with both operands matrices
    if (a1 && b1)
      dy = c.Op("Reshape", {dy, c.Ints({1, 1})});
    else if (a1)
      dy = grad::UnsqueezeAxes(c, dy, {yr - 2});
    else if (b1)
      dy = grad::UnsqueezeAxes(c, dy, {yr - 1});
    if (c.needs_grad(0)) {
      Value* da = c.Op("MatMul", {dy, SwapLast2(c, b, br)});
      if (a1) da = grad::SqueezeAxes(c, da, {yr - 2});  // [..., K]: the batch dims are summed by ReduceToShape
      c.SetGrad(0, c.ReduceToShape(da, c.X(0)));
    }
    const bool a_transposed = a->producer && a->producer->op_type == "Transpose" && a->producer->domain.empty();
    if (c.needs_grad(1) && !a1 && !b1 && br == 2 && ar >= 3 && !a_transposed) {
      // A Linear layer on [..., K] rows (B a [K, N] weight, broadcast over A's batch): dB = A^T dY over all rows at
      // once, one GEMM of the flattened rows, as PyTorch's linear computes it -- not a batch of [K, N] products
      // summed afterwards (T5's tied lm_head: 4 x [512, 32128] products, their sum and a Transpose of it were 98 ms
      // of its bf16 step). Not when A is a Transpose's output: its rows would be copied out, where the batched
      // product reads the untransposed value through its flags (passes/fold_transpose.h).
      Value* rows_a = c.Op("Flatten", {a}, {{"axis", Attribute::Int(ar - 1)}});
      Value* rows_dy = c.Op("Flatten", {dy}, {{"axis", Attribute::Int(ar - 1)}});
      c.SetGrad(1, c.Op("Gemm", {rows_a, rows_dy}, {{"transA", Attribute::Int(1)}}));
    } else if (c.needs_grad(1)) {
      Value* db = c.Op("MatMul", {SwapLast2(c, a, ar), dy});
      if (b1) db = grad::SqueezeAxes(c, db, {yr - 1});
      c.SetGrad(1, c.ReduceToShape(db, c.X(1)));
    }
  });
  // Y = alpha op(A) op(B) + beta C.
  r.SetGrad("", "Gemm", [](GradContext& c) {
    const Node& n = c.node();
    const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
    const float alpha = n.attr_float("alpha", 1.0f), beta = n.attr_float("beta", 1.0f);
    auto gemm = [&](Value* x, Value* y, bool tx, bool ty) {
      return c.Op("Gemm", {x, y},
                  {{"transA", Attribute::Int(tx)}, {"transB", Attribute::Int(ty)}, {"alpha", Attribute::Float(alpha)}});
    };
    if (c.needs_grad(0))  // dA = alpha dY op(B)^T, or its transpose when A was transposed
      c.SetGrad(0, ta ? gemm(c.X(1), c.dY(0), tb, true) : gemm(c.dY(0), c.X(1), false, !tb));
    if (c.needs_grad(1))  // dB = alpha op(A)^T dY, or its transpose when B was transposed
      c.SetGrad(1, tb ? gemm(c.dY(0), c.X(0), true, ta) : gemm(c.X(0), c.dY(0), !ta, false));
    if (c.needs_grad(2)) {
      Value* g = beta == 1.0f ? c.dY(0) : c.Op("Mul", {c.dY(0), c.Scalar(beta, c.dY(0))});
      c.SetGrad(2, c.ReduceToShape(g, c.X(2)));
    }
  });
}

}  // namespace ot
