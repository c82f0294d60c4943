// ai.onnxtrain.FusedElementwise(inputs...) -> outputs...: a cluster that passes/cluster_fusion.cc made of
// elementwise ops and row reductions. Attributes:
//   program       the cluster's program in text form (kernel_common/cluster_program.h), readable in the printer
//                 and the exported graph;
//   row_keepdims  per output: 1 when a row output keeps the reduced axes as 1s, 0 when it drops them (ignored for
//                 full outputs);
//   fused_ops     the ops it replaced ("Mul /blocks.0/Mul_1", ...), for reports and profiles.
// ai.onnxtrain.MatMulEpilogue(A [..., M, K], B [K, N], bias [N] or absent, operands...) -> outputs...: a GEMM with a
// cluster folded into its epilogue (passes/fuse_epilogue.cc, --fuse=full): the program's input 0 is
// Y = A B (+ bias) and its input i >= 1 the node's input i + 2; same attributes as FusedElementwise.
// ai.onnxtrain.ConvEpilogue(X, W, B or absent, operands...) -> outputs...: a Conv (its attributes: auto_pad,
// dilations, group, kernel_shape, pads, strides) with a cluster folded into its epilogue (the same pass): program
// input 0 is Y = Conv(X, W, B), input i >= 1 the node's input i + 2.
// ai.onnxtrain.BatchNormRelu(X, scale, B, input_mean, input_var) {epsilon, momentum, training_mode} -> Y,
// running_mean, running_var: Relu(BatchNormalization(...)) in one pass (passes/fuse_batch_norm.cc, --fuse=lite and
// full); inputs, outputs and inference as BatchNormalization's (opset >= 14 semantics).
// ai.onnxtrain.ResidualLayerNorm(X, Scale, B, R) {axis, epsilon, stash_type} -> Y, Mean, InvStdDev, S: S = X + R
// (the residual Add), Y = LayerNormalization(S, Scale, B) in one pass over each block of rows
// (passes/fuse_residual_norm.cc, --fuse=lite and full); outputs 0-2 as LayerNormalization's, S like X.
// Shapes: the domain D is the broadcast of the full inputs' shapes (input instructions without `row`); a full
// output has D's shape, a row output D's with the last reduce_axes dims 1 or dropped. Output dtypes are those of
// the stored instructions.
#include <stdexcept>

#include "graph/error.h"
#include "graph/graph.h"
#include "graph/infer_util.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"
#include "kernel_common/cluster_program.h"

namespace ot {

namespace {

DataType TypeOf(cluster::DType t) {
  switch (t) {
    case cluster::DType::kF32:
      return DataType::kFloat32;
    case cluster::DType::kF16:
      return DataType::kFloat16;
    case cluster::DType::kBF16:
      return DataType::kBFloat16;
    case cluster::DType::kBool:
      return DataType::kBool;
  }
  return DataType::kUndefined;
}

// Output dtypes and shapes of a cluster program whose input i has the shape input_shape(i) (the broadcast of its
// full inputs is the domain).
template <typename ShapeOf>
void InferProgramOutputs(InferContext& ctx, const cluster::Program& p, ShapeOf input_shape) {
  if (static_cast<int>(p.outputs.size()) != ctx.num_outputs())
    ctx.Fail("the program stores " + std::to_string(p.outputs.size()) + " outputs, the node has " +
             std::to_string(ctx.num_outputs()));
  std::vector<Shape> full;
  std::vector<bool> seen(p.num_inputs, false);
  for (const cluster::Instr& ins : p.code)
    if (ins.op == cluster::Op::kInput && !ins.row && !seen[ins.a]) {
      seen[ins.a] = true;
      full.push_back(input_shape(ins.a));
    }
  if (full.empty()) ctx.Fail("the program loads no full input, so its domain is unknown");
  const Shape d = BroadcastShapes(ctx, full);
  const std::vector<int64_t> keep = ctx.node.attr_ints("row_keepdims");
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const cluster::Instr& ins = p.code[p.outputs[i]];
    Shape s = d;
    if (ins.row) {
      if (!d.known_rank()) {
        s = Shape();
      } else {
        if (d.rank() < p.reduce_axes) ctx.Fail("the domain has fewer axes than the program reduces");
        std::vector<Dim> dims(d.dims().begin(), d.dims().end() - p.reduce_axes);
        if (i < static_cast<int>(keep.size()) && keep[i])
          for (int k = 0; k < p.reduce_axes; ++k) dims.push_back(Dim(1));
        s = Shape(dims);
      }
    }
    ctx.set_output(i, TypeOf(ins.dtype), s);
  }
}

cluster::Program ParseOrFail(InferContext& ctx) {
  try {
    return cluster::ParseProgram(ctx.node.attr_string("program", ""));
  } catch (const std::invalid_argument& e) {
    ctx.Fail(std::string("bad program: ") + e.what());
  }
}

void InferFused(InferContext& ctx) {
  const cluster::Program p = ParseOrFail(ctx);
  if (p.num_inputs != ctx.num_inputs())
    ctx.Fail("the program reads " + std::to_string(p.num_inputs) + " inputs, the node has " +
             std::to_string(ctx.num_inputs()));
  InferProgramOutputs(ctx, p, [&](int i) { return ctx.Require(i); });
}

// MatMulEpilogue(A [..., M, K], B [K, N], bias [N] or absent, operands...): program input 0 is Y = A B (+ bias),
// [..., M, N]; program input i >= 1 is node input i + 2.
void InferMatMulEpilogue(InferContext& ctx) {
  const cluster::Program p = ParseOrFail(ctx);
  if (ctx.num_inputs() < 3 || p.num_inputs != ctx.num_inputs() - 2)
    ctx.Fail("the program reads " + std::to_string(p.num_inputs) + " inputs: Y and node inputs 3.. expected");
  const Shape a = ctx.Require(0), b = ctx.Require(1);
  Shape y;
  if (a.known_rank() && b.known_rank()) {
    if (a.rank() < 2 || b.rank() != 2) ctx.Fail("takes A of rank >= 2 and B [K, N]");
    std::vector<Dim> dims(a.dims().begin(), a.dims().end() - 1);
    dims.push_back(b.dims()[1]);
    y = Shape(dims);
  }
  InferProgramOutputs(ctx, p, [&](int i) { return i == 0 ? y : ctx.Require(i + 2); });
}

// ConvEpilogue(X, W, B or absent, operands...): Y's type and shape by Conv's own inference over the first three
// inputs (the node carries Conv's attributes).
void InferConvEpilogue(InferContext& ctx) {
  const cluster::Program p = ParseOrFail(ctx);
  if (ctx.num_inputs() < 3 || p.num_inputs != ctx.num_inputs() - 2)
    ctx.Fail("the program reads " + std::to_string(p.num_inputs) + " inputs: Y and node inputs 3.. expected");
  const OpSchema* conv = OpRegistry::Global().Find("", "Conv");
  if (!conv || !conv->infer) ctx.Fail("Conv has no shape inference registered");
  std::vector<TypeShape> ins;
  for (int i = 0; i < 3; ++i)
    ins.push_back(ctx.has_input(i) ? TypeShape{ctx.input_type(i), ctx.input_shape(i), true} : TypeShape{});
  InferContext cc(ctx.node, ins, {ctx.input_value(0), ctx.input_value(1), ctx.input_value(2)}, 1);
  conv->infer(cc);
  const Shape y = cc.outputs()[0].shape;
  InferProgramOutputs(ctx, p, [&](int i) { return i == 0 ? y : ctx.Require(i + 2); });
}

}  // namespace

namespace {

// The internal op `name` (ai.onnxtrain): a blank schema with `infer`, or a copy of `base` (its facts, opset 1 on).
OpSchema InternalSchema(const std::string& name, InferFn infer) {
  OpSchema s;
  s.op_type = name;
  s.domain = kInternalDomain;
  s.infer = std::move(infer);
  return s;
}
OpSchema InternalCopy(const std::string& name, const OpSchema& base) {
  OpSchema s = base;
  s.op_type = name;
  s.domain = kInternalDomain;
  s.min_opset = 1;
  return s;
}

}  // namespace

void RegisterFusedOps(OpRegistry& r) {
  r.Register(InternalSchema("FusedElementwise", InferFused));
  r.Register(InternalSchema("MatMulEpilogue", InferMatMulEpilogue));
  r.Register(InternalSchema("ConvEpilogue", InferConvEpilogue));
  if (const OpSchema* ln = r.Find("", "LayerNormalization")) {
    OpSchema rl = InternalCopy("ResidualLayerNorm", *ln);
    rl.recompute_cheap = false;  // a copy computing Y alone would need S (rematerialize.h)
    rl.trailing_outputs_optional = false;
    rl.grad = nullptr;  // made after autodiff
    rl.fusible = FusibleKind::kOpaque;
    rl.lower = nullptr;
    rl.infer = [base = ln->infer](InferContext& ctx) {
      base(ctx);
      if (ctx.has_output(3)) ctx.set_output(3, ctx.input_type(0), ctx.input_shape(0));
    };
    r.Register(rl);
  }
  if (const OpSchema* bn = r.Find("", "BatchNormalization")) r.Register(InternalCopy("BatchNormRelu", *bn));
}

}  // namespace ot
