// Internal optimizer update op (domain ai.onnxtrain), appended by passes/optimizer.cc.
//
//   OptimizerUpdate(lr, step, p_1..p_n, g_1..g_n, s0_1..s0_n, s1_1..s1_n)
//       -> (p'_1..p'_n, s0'_1..s0'_n, s1'_1..s1'_n, step', grad_norm, skipped)
//   attributes: kind       "sgd" | "momentum" | "nesterov" | "adam" | "adamw" | "lamb"
//               num_params n
//               hyperparameters  float64 tensor [beta1, beta2, eps, weight_decay, momentum, clip_grad_norm]
//                          (double, so a float64 run matches torch.optim, whose hyperparameters are Python floats)
//   lr: float64 scalar; step: int64 scalar (optimizer steps taken). States per parameter: none (sgd), the
//   momentum buffer (momentum, nesterov), or m and v (adam, adamw, lamb); each has its parameter's shape and dtype.
//   grad_norm: float32 scalar, the global L2 norm of the gradients before clipping; skipped: bool scalar, true when
//   some gradient element is not finite, in which case every output equals its input (step' = step).
//   accumulate K (default 1) > 1: gradient accumulation; two more inputs at the end, micro (int64 scalar: micro-
//   steps already summed) and acc_1..acc_n (the running gradient sums, like their parameters), and two more
//   outputs, micro' and acc'_1..acc'_n. Micro-steps 1..K-1 only add their gradients (every other output equals
//   its input; grad_norm is NaN, skipped false); the K-th updates with the mean gradient and zeroes the sums.
//   lr_schedule (0 constant, 1 linear, 2 cosine), warmup, total_steps: the update uses
//   lr * LrScheduleFactor(lr_schedule, step, warmup, total_steps) (kernel_common/optim_math.h).
// One node updates the whole model (a multi-tensor kernel), not one node per parameter.
#include "graph/grad/grad_rules.h"
#include "graph/grad_context.h"
#include "graph/op_registry.h"

namespace ot {

namespace {
// States per parameter of an optimizer kind; -1 for an unknown kind.
int OptimizerStatesPerParam(const std::string& kind) {
  if (kind == "sgd") return 0;
  if (kind == "momentum" || kind == "nesterov") return 1;
  if (kind == "adam" || kind == "adamw" || kind == "lamb") return 2;
  return -1;
}

}  // namespace

void RegisterOptimizerOps(OpRegistry& r) {
  OpSchema s;
  s.op_type = "OptimizerUpdate";
  s.domain = kInternalDomain;
  s.infer = [](InferContext& ctx) {
    const std::string kind = ctx.node.attr_string("kind", "");
    const int k = OptimizerStatesPerParam(kind);
    if (k < 0) ctx.Fail("unknown optimizer kind '" + kind + "'");
    const int64_t n = ctx.node.attr_int("num_params", -1);
    if (n < 0) ctx.Fail("attribute num_params is missing");
    const Attribute* hp = ctx.node.attr("hyperparameters");
    if (!hp || hp->kind != Attribute::Kind::kTensor || hp->t.numel() != 6)
      ctx.Fail("attribute hyperparameters must be a tensor of 6 values");
    const int ni = static_cast<int>(n);
    const int64_t accumulate = ctx.node.attr_int("accumulate", 1);
    if (accumulate < 1) ctx.Fail("attribute accumulate must be >= 1");
    const int extra = accumulate > 1 ? 1 + ni : 0;
    if (ctx.num_inputs() != 2 + (2 + k) * ni + extra)
      ctx.Fail("expects " + std::to_string(2 + (2 + k) * ni + extra) +
               " inputs (lr, step, params, grads, states[, micro, sums]), got " + std::to_string(ctx.num_inputs()));
    if (ctx.num_outputs() != (1 + k) * ni + 3 + extra)
      ctx.Fail("expects " + std::to_string((1 + k) * ni + 3 + extra) + " outputs, got " +
               std::to_string(ctx.num_outputs()));
    if (extra) {
      const int mi = 2 + (2 + k) * ni, mo = (1 + k) * ni + 3;
      ctx.Require(mi);
      if (ctx.input_type(mi) != DataType::kInt64) ctx.Fail("the micro-step counter must be int64");
      if (ctx.has_output(mo)) ctx.set_output(mo, DataType::kInt64, Shape::Static({}));
      for (int i = 0; i < ni; ++i) {
        if (ctx.input_type(mi + 1 + i) != ctx.input_type(2 + i))
          ctx.Fail("gradient sum of parameter " + std::to_string(i) + " has another dtype than the parameter");
        if (ctx.has_output(mo + 1 + i)) ctx.set_output(mo + 1 + i, ctx.input_type(2 + i), ctx.input_shape(mi + 1 + i));
      }
    }
    ctx.Require(0);
    ctx.Require(1);
    if (ctx.input_type(1) != DataType::kInt64) ctx.Fail("the step counter must be int64");
    for (int i = 0; i < ni; ++i) {
      const DataType t = ctx.input_type(2 + i);
      if (!IsFloat(t)) ctx.Fail("parameter " + std::to_string(i) + " is not a float tensor");
      for (int j = 1; j < 2 + k; ++j)
        if (ctx.input_type(2 + j * ni + i) != t)
          ctx.Fail("gradient/state of parameter " + std::to_string(i) + " has another dtype than the parameter");
      for (int j = 0; j < 1 + k; ++j) {
        const int in = j == 0 ? 2 + i : 2 + (1 + j) * ni + i;
        if (ctx.has_output(j * ni + i)) ctx.set_output(j * ni + i, t, ctx.input_shape(in));
      }
    }
    const int base = (1 + k) * ni;
    if (ctx.has_output(base)) ctx.set_output(base, DataType::kInt64, Shape::Static({}));
    if (ctx.has_output(base + 1)) ctx.set_output(base + 1, DataType::kFloat32, Shape::Static({}));
    if (ctx.has_output(base + 2)) ctx.set_output(base + 2, DataType::kBool, Shape::Static({}));
  };
  r.Register(s);
}

}  // namespace ot
