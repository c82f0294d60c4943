// Gradient rules of MatMul and Gemm, as GEMMs of the output gradient with the other operand.
#include "graph/error.h"
#include "graph/grad/grad_rules.h"
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
  // Y = A B (numpy batched): dA = dY B^T, dB = A^T dY, each reduced over the batch dims it was broadcast along.
  r.SetGrad("", "MatMul", [](GradContext& c) {
    const Shape& a = c.X(0)->shape;
    const Shape& b = c.X(1)->shape;
    if (!a.known_rank() || !b.known_rank()) c.Fail("operand ranks must be known");
    if (a.rank() < 2 || b.rank() < 2) c.Fail("1-D MatMul operands are not supported yet");
    if (c.needs_grad(0)) c.SetGrad(0, c.ReduceToShape(c.Op("MatMul", {c.dY(0), SwapLast2(c, c.X(1), b.rank())}), c.X(0)));
    if (c.needs_grad(1)) c.SetGrad(1, c.ReduceToShape(c.Op("MatMul", {SwapLast2(c, c.X(0), a.rank()), c.dY(0)}), c.X(1)));
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
