// Op schema of ai.onnxtrain.AllReduce, the gradient all-reduce of data-parallel training (passes/data_parallel.h):
//   AllReduce(g1, ..., gk, [after]) {world, count = k} -> (m1, ..., mk), mi the mean of gi over the `world` ranks
//   (same dtype and shape). `after`, when present, is an output of the previous bucket's AllReduce, not read: it
//   orders the buckets' collectives, which every rank must issue in the same order.
// Float tensors only. The kernel checks `world` against the process group it runs in (dist/comm.h).
#include <string>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {

namespace {

void InferAllReduce(InferContext& ctx) {
  const int n = static_cast<int>(ctx.node.attr_int("count", static_cast<int64_t>(ctx.node.inputs.size())));
  const int ins = static_cast<int>(ctx.node.inputs.size());
  if (n < 1 || (ins != n && ins != n + 1))
    ctx.Fail("count " + std::to_string(n) + " needs " + std::to_string(n) +
             " inputs (and an optional ordering one), got " + std::to_string(ins));
  ctx.RequireArity(n, ins, n);
  if (static_cast<int>(ctx.node.outputs.size()) != n)
    ctx.Fail("needs one output per reduced input, got " + std::to_string(ctx.node.outputs.size()) + " for " +
             std::to_string(n));
  if (ctx.node.attr_int("world", 0) < 1) ctx.Fail("world must be >= 1");
  for (int i = 0; i < n; ++i) {
    const Shape& s = ctx.Require(i);
    const DataType t = ctx.input_type(i);
    if (t != DataType::kFloat32 && t != DataType::kFloat64 && t != DataType::kFloat16 && t != DataType::kBFloat16)
      ctx.Fail("input " + std::to_string(i) + " must be a float tensor, got " + DataTypeName(t));
    ctx.set_output(i, t, s);
  }
}

}  // namespace

void RegisterCollectiveOps(OpRegistry& r) {
  OpSchema s;
  s.op_type = "AllReduce";
  s.domain = kInternalDomain;
  s.infer = InferAllReduce;
  r.Register(std::move(s));
}

}  // namespace ot
