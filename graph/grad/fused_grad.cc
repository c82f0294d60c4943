// Gradient rules of the fused forward ops (graph/ops/internal_fused.cc):
//   MatMulBias(A, B, bias) {activation}, Y = act(A B + bias), A [..., M, K], B [K, N], bias [N]:
//     G    = dY, or ReluGrad(dY, Y) (dY where Y > 0, else 0) when activation = relu: the mask comes from the saved
//            output, as the Relu rule does, so the pre-activation value is never stored;
//     dA   = G B^T                               (MatMul with Transpose(B); Gemm(G, B, transB) when A is 2-D)
//     dB   = sum over the leading dims of A^T G  = Gemm(Flatten(A), Flatten(G), transA): one [K, M'] x [M', N]
//            GEMM over the M' = d0 ... M rows, never a batched [d0, K, N] product reduced afterwards;
//     with trans_b (B stored [N, K]): dA = G B (MatMul, or Gemm when A is 2-D), dB = Gemm(Flatten(G), Flatten(A),
//            transA), [N, K] like B;
//     dbias = sum of G over every axis but the last (ReduceToShape to bias's [N]).
//   Each gradient is assigned (SetGrad), never accumulated here: the autodiff pass sums the gradients of a value
//   used twice (an A that also feeds a residual connection).
#include "graph/error.h"
#include "graph/grad_context.h"
#include "graph/op_registry.h"

namespace ot {

void RegisterMatMulBiasGrad(OpRegistry& r) {
  r.SetGrad(kInternalDomain, "MatMulBias", [](GradContext& c) {
    const Shape& a = c.X(0)->shape;
    if (!a.known_rank() || a.rank() < 2) c.Fail("A's rank must be known and >= 2");
    const int rank = a.rank();
    Value* g = c.dY(0);
    if (!g) return;
    if (c.node().attr_string("activation", "none") == "relu") g = c.Op("ReluGrad", {g, c.Y(0)}, {}, kInternalDomain);
    auto gemm = [&](Value* x, Value* y, bool tx, bool ty) {
      return c.Op("Gemm", {x, y}, {{"transA", Attribute::Int(tx)}, {"transB", Attribute::Int(ty)}});
    };
    const bool tb = c.node().attr_int("trans_b", 0) != 0;
    if (c.needs_grad(0)) {
      if (rank == 2) {
        c.SetGrad(0, gemm(g, c.X(1), false, !tb));
      } else {
        Value* bt = tb ? c.X(1) : c.Op("Transpose", {c.X(1)}, {{"perm", Attribute::Ints({1, 0})}});
        c.SetGrad(0, c.Op("MatMul", {g, bt}));
      }
    }
    if (c.needs_grad(1)) {
      auto rows = [&](Value* v) {  // [..., M, X] -> [M', X]
        return rank == 2 ? v : c.Op("Flatten", {v}, {{"axis", Attribute::Int(rank - 1)}});
      };
      c.SetGrad(1, tb ? gemm(rows(g), rows(c.X(0)), true, false) : gemm(rows(c.X(0)), rows(g), true, false));
    }
    if (c.needs_grad(2)) c.SetGrad(2, c.ReduceToShape(g, c.X(2)));
  });
}

}  // namespace ot
