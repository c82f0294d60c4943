// Op schemas of the gradient all-reduce of data-parallel training (passes/data_parallel.h), in two halves so that the
// communication runs while the backward goes on:
//   AllReduceStart(g1, ..., gk, [after]) {world, count = k} -> bucket: g1..gk flattened into one 1-D bucket, whose
//     sum over the `world` ranks is started (dist/comm.h); `after`, when present, is the previous bucket (not read:
//     it orders the buckets' collectives, which every rank must issue in the same order).
//   AllReduceWait(bucket, [last]) {world, dims, ranks} -> (m1, ..., mk): waits for the sum and writes each mean
//     (sum / world) in its gradient's shape -- `ranks` the rank of each, `dims` their dims one after another; `last`,
//     when present, is the last bucket (not read: the waits come after every bucket has started).
//   With scatter = 1 (--shard-optimizer) the pair reduce-scatters: the bucket is padded with zeros to a multiple of
//     `world` values and each rank receives its block of the sum (graph/ops/optimizer_shard.h: the buckets are the
//     shard's groups); the wait writes the mean where the block lies in the gradients and zeros elsewhere.
//   AllReduceSum(x, [after]) {world} -> y: the sum of x over the ranks, blocking (--sync-batchnorm's statistics,
//     passes/sync_batchnorm.h); its gradient is the sum of the output's gradients (graph/grad/collective_grad.cc).
// Float tensors; the bucket has the gradients' dtype.
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {

namespace {

bool IsFloatType(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

void InferStart(InferContext& ctx) {
  const int ins = static_cast<int>(ctx.node.inputs.size());
  const int n = static_cast<int>(ctx.node.attr_int("count", ins));
  if (n < 1 || (ins != n && ins != n + 1))
    ctx.Fail("count " + std::to_string(n) + " needs " + std::to_string(n) +
             " inputs (and an optional ordering one), got " + std::to_string(ins));
  ctx.RequireArity(n, ins, 1);
  if (ctx.node.attr_int("world", 0) < 1) ctx.Fail("world must be >= 1");
  const DataType t = ctx.input_type(0);
  int64_t total = 0;
  bool known = true;
  for (int i = 0; i < n; ++i) {
    const Shape& s = ctx.Require(i);
    if (!IsFloatType(ctx.input_type(i)) || ctx.input_type(i) != t)
      ctx.Fail("input " + std::to_string(i) + " must be " + DataTypeName(t) + " (a float type), got " +
               DataTypeName(ctx.input_type(i)));
    const std::optional<int64_t> e = s.NumElements();
    if (e)
      total += *e;
    else
      known = false;
  }
  // Reduce-scattered, the bucket is padded to a whole number of blocks, one per rank.
  const int64_t world = ctx.node.attr_int("world", 1);
  if (ctx.node.attr_int("scatter", 0)) total = (total + world - 1) / world * world;
  ctx.set_output(0, t, known ? Shape::Static({total}) : Shape(std::vector<Dim>{Dim()}));
}

void InferWait(InferContext& ctx) {
  ctx.RequireArity(1, 2, static_cast<int>(ctx.node.outputs.size()));
  ctx.Require(0);
  const DataType t = ctx.input_type(0);
  if (!IsFloatType(t)) ctx.Fail("the bucket must be a float tensor, got " + DataTypeName(t));
  const std::vector<int64_t> ranks = ctx.node.attr_ints("ranks");
  const std::vector<int64_t> dims = ctx.node.attr_ints("dims");
  if (ranks.size() != ctx.node.outputs.size())
    ctx.Fail("ranks has " + std::to_string(ranks.size()) + " entries for " + std::to_string(ctx.node.outputs.size()) +
             " outputs");
  size_t at = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || at + static_cast<size_t>(ranks[i]) > dims.size()) ctx.Fail("dims is shorter than ranks say");
    std::vector<int64_t> d(dims.begin() + static_cast<long>(at), dims.begin() + static_cast<long>(at + ranks[i]));
    at += static_cast<size_t>(ranks[i]);
    ctx.set_output(static_cast<int>(i), t, Shape::Static(d));
  }
}

void InferSum(InferContext& ctx) {
  ctx.RequireArity(1, 2, 1);
  const Shape& s = ctx.Require(0);
  if (!IsFloatType(ctx.input_type(0))) ctx.Fail("x must be a float tensor, got " + DataTypeName(ctx.input_type(0)));
  if (ctx.node.attr_int("world", 0) < 1) ctx.Fail("world must be >= 1");
  ctx.set_output(0, ctx.input_type(0), s);
}

}  // namespace

void RegisterCollectiveOps(OpRegistry& r) {
  OpSchema sum;
  sum.op_type = "AllReduceSum";
  sum.domain = kInternalDomain;
  sum.infer = InferSum;
  r.Register(std::move(sum));
  OpSchema s;
  s.op_type = "AllReduceStart";
  s.domain = kInternalDomain;
  s.infer = InferStart;
  r.Register(std::move(s));
  OpSchema w;
  w.op_type = "AllReduceWait";
  w.domain = kInternalDomain;
  w.infer = InferWait;
  r.Register(std::move(w));
}

}  // namespace ot
