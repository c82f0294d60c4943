// The ONNX training ops of domain ai.onnx.preview.training, opset 1 (onnx/defs/training/defs.cc):
//   Adagrad(R, T, X_1..X_n, G_1..G_n, H_1..H_n) -> (X_new_1..X_new_n, H_new_1..H_new_n)
//     attributes decay_factor (0), epsilon (1e-6), norm_coefficient (0)
//   Adam(R, T, X_1..X_n, G_1..G_n, V_1..V_n, H_1..H_n) -> (X_new.., V_new.., H_new..)
//     attributes alpha (0.9), beta (0.999), epsilon (1e-6), norm_coefficient (0), norm_coefficient_post (0)
//   Momentum(R, T, X_1..X_n, G_1..G_n, V_1..V_n) -> (X_new.., V_new..)
//     attributes alpha, beta, mode ("standard" | "nesterov"), norm_coefficient -- all required
//   R: float/double scalar learning rate; T: int64 scalar iteration count; X/G/states: float/double tensors of
//   one dtype and shape per parameter. Kernels: executor/kernels/training_preview.cc (math in
//   cpu_ops/training_preview.h).
//   Gradient(inputs = the values named by xs then zs) -> (dY/dX_1..dY/dX_n), attributes xs, zs (optional), y.
//     Never run as a kernel: passes/gradient_op.h expands it into standard ops with our autodiff before a plan is
//     made. Its schema only types the outputs (each like its X).
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {

namespace {

constexpr const char* kPreviewDomain = "ai.onnx.preview.training";

// Checks the operand layout R, T, X.., G.., S1.., ..., Sk.. -> X_new.., S1_new.., ..., Sk_new.. (k states per
// tensor) and types the outputs.
void InferPreviewOptimizer(InferContext& ctx, int states) {
  const int per = 2 + states;  // X, G, states
  if (ctx.num_inputs() < 2 + per || (ctx.num_inputs() - 2) % per != 0)
    ctx.Fail("expects 2 + " + std::to_string(per) + "*n inputs (R, T, X.., G.., states..), got " +
             std::to_string(ctx.num_inputs()));
  const int n = (ctx.num_inputs() - 2) / per;
  if (ctx.num_outputs() != (1 + states) * n)
    ctx.Fail("expects " + std::to_string((1 + states) * n) + " outputs for " + std::to_string(n) + " tensors, got " +
             std::to_string(ctx.num_outputs()));
  for (int i = 0; i < ctx.num_inputs(); ++i) ctx.Require(i);
  const DataType rt = ctx.input_type(0);
  if (rt != DataType::kUndefined && rt != DataType::kFloat32 && rt != DataType::kFloat64)
    ctx.Fail("R (learning rate) must be float or double, not " + DataTypeName(rt));
  if (ctx.input_type(1) != DataType::kUndefined && ctx.input_type(1) != DataType::kInt64)
    ctx.Fail("T (iteration count) must be int64, not " + DataTypeName(ctx.input_type(1)));
  for (int s = 0; s < 2; ++s) {
    const Shape& sh = ctx.input_shape(s);
    if (sh.known_rank() && sh.NumElements() && *sh.NumElements() != 1)
      ctx.Fail(std::string(s == 0 ? "R" : "T") + " must be a scalar, got shape " + sh.ToString());
  }
  for (int i = 0; i < n; ++i) {
    const DataType t = ctx.input_type(2 + i);
    if (t != DataType::kUndefined && t != DataType::kFloat32 && t != DataType::kFloat64)
      ctx.Unsupported("tensor " + std::to_string(i) + " is " + DataTypeName(t) + " (float and double only)");
    for (int j = 1; j < per; ++j) {
      const DataType u = ctx.input_type(2 + j * n + i);
      if (t != DataType::kUndefined && u != DataType::kUndefined && u != t)
        ctx.Fail("input " + std::to_string(2 + j * n + i) + " is " + DataTypeName(u) + " but its X is " +
                 DataTypeName(t));
    }
    if (ctx.has_output(i)) ctx.set_output(i, t, ctx.input_shape(2 + i));
    for (int s = 0; s < states; ++s)
      if (ctx.has_output((1 + s) * n + i)) ctx.set_output((1 + s) * n + i, t, ctx.input_shape(2 + (2 + s) * n + i));
  }
}

}  // namespace

void RegisterTrainingPreviewOps(OpRegistry& r) {
  OpSchema adagrad;
  adagrad.op_type = "Adagrad";
  adagrad.domain = kPreviewDomain;
  adagrad.infer = [](InferContext& ctx) { InferPreviewOptimizer(ctx, 1); };
  r.Register(adagrad);

  OpSchema adam;
  adam.op_type = "Adam";
  adam.domain = kPreviewDomain;
  adam.infer = [](InferContext& ctx) { InferPreviewOptimizer(ctx, 2); };
  r.Register(adam);

  OpSchema momentum;
  momentum.op_type = "Momentum";
  momentum.domain = kPreviewDomain;
  momentum.infer = [](InferContext& ctx) {
    for (const char* a : {"alpha", "beta", "mode", "norm_coefficient"})
      if (!ctx.node.has_attr(a)) ctx.Fail(std::string("required attribute '") + a + "' is missing");
    const std::string mode = ctx.node.attr_string("mode", "");
    if (mode != "standard" && mode != "nesterov") ctx.Fail("mode must be 'standard' or 'nesterov', not '" + mode + "'");
    InferPreviewOptimizer(ctx, 1);
  };
  r.Register(momentum);

  OpSchema gradient;
  gradient.op_type = "Gradient";
  gradient.domain = kPreviewDomain;
  gradient.infer = [](InferContext& ctx) {
    const std::vector<std::string> xs =
        ctx.node.has_attr("xs") ? ctx.node.attr("xs")->strings : std::vector<std::string>{};
    if (xs.empty()) ctx.Fail("attribute xs (the differentiated tensors) is missing or empty");
    if (ctx.node.attr_string("y", "").empty()) ctx.Fail("attribute y (the differentiated tensor) is missing");
    if (ctx.num_outputs() != static_cast<int>(xs.size()))
      ctx.Fail("expects one output per name in xs (" + std::to_string(xs.size()) + "), got " +
               std::to_string(ctx.num_outputs()));
    for (size_t i = 0; i < xs.size(); ++i)
      if (ctx.has_output(static_cast<int>(i)) && ctx.has_input(static_cast<int>(i)))
        ctx.set_output(static_cast<int>(i), ctx.input_type(static_cast<int>(i)), ctx.input_shape(static_cast<int>(i)));
  };
  r.Register(gradient);
}

}  // namespace ot
