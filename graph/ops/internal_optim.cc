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
//   Mixed precision (issue 4; graph/ops/optimizer_layout.h has the full operand layout):
//   half_params (ints, ascending parameter indices) + half_dtype (10 float16 | 16 bfloat16): one more output per
//   listed parameter, its half copy round(p') (round to nearest even), written in the update's pass over the
//   parameter, also on skipped steps and micro-steps (then round(p)). passes/master_weights.h makes them.
//   loss_scaling "none" | "static" | "dynamic": three more inputs after the accumulation ones, scale S (float32
//   scalar, what the loss gradient seed was multiplied by), good_steps and bad_steps (int64 scalars), and three
//   more outputs after the half copies, S', good', bad'. The kernel multiplies every incoming gradient by 1/S in
//   the pass that checks finiteness and sums squares, so grad_norm, clipping and accumulation see unscaled
//   gradients. "dynamic" updates S by LossScaleUpdate (kernel_common/optim_math.h) with the attributes
//   growth_factor (2), backoff_factor (0.5), growth_interval (2000), overflows_to_backoff (1), min_scale (1);
//   micro-steps leave S, good and bad as they are; "static" never changes them. passes/loss_scaling.h.
//   stats = 1: two more float32 scalar outputs at the end, param_norm (L2 norm of all parameters after the
//   call) and zero_grad_fraction (share of exactly-zero elements in this call's incoming gradients: fp16
//   gradients flushed to zero by underflow show here).
//   shard_master = 1 (with shard_world > 1; passes/shard_masters.h): one more input and output at the very end, the
//   rank's shard of the float32 master weights of every parameter (1-D, laid out as the sharded states); a
//   parameter without input p_i (and output p'_i) exists only there and in its half copy; master_names (strings,
//   n) names every parameter.
//   The gradient of a float32 parameter may be float16 or bfloat16 (not sharded): read as it is, widened exactly
//   (passes/half_grad_update.h folds the Cast that the amp pass puts before the update into it).
//   AMP class deny: the update runs in fp32 (gradients arrive float32; the amp pass casts them).
// One node updates the whole model (a multi-tensor kernel), not one node per parameter.
#include "graph/grad/grad_rules.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/ops/optimizer_layout.h"

namespace ot {

namespace {

// A scalar operand: rank 0, or a static shape of one element (exporters write [1] at times).
bool IsScalarShape(const Shape& s) {
  if (!s.known_rank()) return true;  // unknown until a plan: the kernel checks the element count
  const auto n = s.NumElements();
  return !n || *n == 1;
}

void InferOptimizerUpdate(InferContext& ctx) {
  const std::string kind = ctx.node.attr_string("kind", "");
  const OptimizerLayout l = OptimizerLayout::Of(ctx.node);
  const int k = l.k;
  if (k < 0) ctx.Fail("unknown optimizer kind '" + kind + "'");
  if (ctx.node.attr_int("num_params", -1) < 0) ctx.Fail("attribute num_params is missing");
  const Attribute* hp = ctx.node.attr("hyperparameters");
  if (!hp || hp->kind != Attribute::Kind::kTensor || hp->t.numel() != 6)
    ctx.Fail("attribute hyperparameters must be a tensor of 6 values");
  const int ni = l.n;
  if (l.accumulate < 1) ctx.Fail("attribute accumulate must be >= 1");
  if (l.loss_scaling != "none" && !l.scaling())
    ctx.Fail("attribute loss_scaling must be none, static or dynamic, not '" + l.loss_scaling + "'");
  for (size_t j = 0; j < l.half_params.size(); ++j) {
    const int64_t i = l.half_params[j];
    if (i < 0 || i >= ni)
      ctx.Fail("half_params[" + std::to_string(j) + "] = " + std::to_string(i) + " is not a parameter index (0.." +
               std::to_string(ni - 1) + ")");
    if (j > 0 && i <= l.half_params[j - 1]) ctx.Fail("half_params must be strictly ascending");
  }
  if (l.m() > 0 && l.half_dtype != static_cast<int64_t>(DataType::kFloat16) &&
      l.half_dtype != static_cast<int64_t>(DataType::kBFloat16))
    ctx.Fail("attribute half_dtype must be 10 (float16) or 16 (bfloat16), got " + std::to_string(l.half_dtype));
  if (l.scaling()) {
    const double growth = ctx.node.attr_float("growth_factor", 2.f),
                 backoff = ctx.node.attr_float("backoff_factor", .5f);
    const double min_scale = ctx.node.attr_float("min_scale", 1.f);
    if (!(growth >= 1)) ctx.Fail("growth_factor must be >= 1");
    if (!(backoff > 0 && backoff <= 1)) ctx.Fail("backoff_factor must be in (0, 1]");
    if (!(min_scale > 0)) ctx.Fail("min_scale must be > 0");
    if (ctx.node.attr_int("growth_interval", 2000) < 1) ctx.Fail("growth_interval must be >= 1");
    if (ctx.node.attr_int("overflows_to_backoff", 1) < 1) ctx.Fail("overflows_to_backoff must be >= 1");
  }
  if (ctx.num_inputs() != l.num_inputs())
    ctx.Fail("expects " + std::to_string(l.num_inputs()) + " inputs (lr, step, params, grads, states" +
             (l.accumulating() ? ", micro, sums" : "") + (l.scaling() ? ", scale, good_steps, bad_steps" : "") +
             "), got " + std::to_string(ctx.num_inputs()));
  if (ctx.num_outputs() != l.num_outputs())
    ctx.Fail("expects " + std::to_string(l.num_outputs()) + " outputs (params, states, step, grad_norm, skipped" +
             (l.accumulating() ? ", micro, sums" : "") + (l.m() ? ", " + std::to_string(l.m()) + " half copies" : "") +
             (l.scaling() ? ", scale, good_steps, bad_steps" : "") +
             (l.stats ? ", param_norm, zero_grad_fraction" : "") + "), got " + std::to_string(ctx.num_outputs()));
  // A parameter whose master is only in the master shard: float32, shaped as its gradient.
  if (ctx.node.has_attr("shard_master") && !l.shard_master)
    ctx.Fail("attribute shard_master needs a sharded optimizer (shard_world > 1)");
  auto absent = [&](int i) { return l.shard_master && !ctx.node.has_input(l.param_in(i)); };
  auto ptype = [&](int i) { return absent(i) ? DataType::kFloat32 : ctx.input_type(l.param_in(i)); };
  auto pshape = [&](int i) { return absent(i) ? ctx.input_shape(l.grad_in(i)) : ctx.input_shape(l.param_in(i)); };
  if (l.shard_master) {
    if (static_cast<int>(ctx.node.attr_strings("master_names").size()) != ni)
      ctx.Fail("attribute master_names must name each of the " + std::to_string(ni) + " parameters");
    const Shape& s = ctx.Require(l.master_in());
    if (ctx.input_type(l.master_in()) != DataType::kFloat32 || s.rank() != 1)
      ctx.Fail("the master shard must be a 1-D float32 tensor, got " + DataTypeName(ctx.input_type(l.master_in())) +
               s.ToString());
    if (ctx.has_output(l.master_out())) ctx.set_output(l.master_out(), DataType::kFloat32, s);
  }
  if (l.accumulating()) {
    const int mi = l.micro_in(), mo = l.micro_out();
    ctx.Require(mi);
    if (ctx.input_type(mi) != DataType::kInt64) ctx.Fail("the micro-step counter must be int64");
    if (ctx.has_output(mo)) ctx.set_output(mo, DataType::kInt64, Shape::Static({}));
    for (int i = 0; i < ni; ++i) {
      if (ctx.input_type(l.acc_in(i)) != ptype(i))
        ctx.Fail("gradient sum of parameter " + std::to_string(i) + " has another dtype than the parameter");
      if (ctx.has_output(l.acc_out(i))) ctx.set_output(l.acc_out(i), ptype(i), ctx.input_shape(l.acc_in(i)));
    }
  }
  ctx.Require(0);
  ctx.Require(1);
  if (ctx.input_type(1) != DataType::kInt64) ctx.Fail("the step counter must be int64");
  for (int i = 0; i < ni; ++i) {
    const DataType t = ptype(i);
    if (!IsFloat(t)) ctx.Fail("parameter " + std::to_string(i) + " is not a float tensor");
    // A float32 parameter's gradient may be half (passes/half_grad_update.h), unless sharded.
    const DataType gt = ctx.input_type(l.grad_in(i));
    const bool half_grad =
        t == DataType::kFloat32 && !l.sharded() && (gt == DataType::kFloat16 || gt == DataType::kBFloat16);
    if (gt != t && !half_grad)
      ctx.Fail("gradient of parameter " + std::to_string(i) + " has another dtype than the parameter");
    if (l.sharded() && t != DataType::kFloat32)
      ctx.Fail("parameter " + std::to_string(i) + " is " + DataTypeName(t) + "; a sharded optimizer updates float32");
    if (absent(i) && ctx.has_output(l.param_out(i)))
      ctx.Fail("parameter " + std::to_string(i) + " has an output but no input");
    if (ctx.has_output(l.param_out(i))) ctx.set_output(l.param_out(i), t, pshape(i));
    for (int j = 0; j < k && !l.sharded(); ++j) {
      if (ctx.input_type(l.state_in(j, i)) != t)
        ctx.Fail("state " + std::to_string(j) + " of parameter " + std::to_string(i) +
                 " has another dtype than the parameter");
      if (ctx.has_output(l.state_out(j, i))) ctx.set_output(l.state_out(j, i), t, ctx.input_shape(l.state_in(j, i)));
    }
  }
  if (l.sharded()) {
    if (kind == "lamb")
      ctx.Fail("LAMB cannot be sharded (its trust ratio needs each parameter's whole update); drop --shard-optimizer");
    for (int j = 0; j < k; ++j) {
      const Shape& s = ctx.Require(l.state_in(j, 0));
      if (ctx.input_type(l.state_in(j, 0)) != DataType::kFloat32 || s.rank() != 1)
        ctx.Fail("the sharded state " + std::to_string(j) + " must be a 1-D float32 tensor, got " +
                 DataTypeName(ctx.input_type(l.state_in(j, 0))) + s.ToString());
      if (ctx.has_output(l.state_out(j, 0))) ctx.set_output(l.state_out(j, 0), DataType::kFloat32, s);
    }
  }
  for (int j = 0; j < l.m(); ++j) {
    const int i = static_cast<int>(l.half_params[j]);
    // Master weights are float32: the half copy is round(float32 p'), the same value the amp pass's Cast gave.
    if (ptype(i) != DataType::kFloat32)
      ctx.Fail("parameter " + std::to_string(i) + " has a half copy but is " + DataTypeName(ptype(i)) +
               "; master weights must be float32");
    if (ctx.has_output(l.half_out(j))) ctx.set_output(l.half_out(j), static_cast<DataType>(l.half_dtype), pshape(i));
  }
  if (l.scaling()) {
    const int si = l.scale_in(), so = l.scale_out();
    const char* names[3] = {"loss scale", "good_steps", "bad_steps"};
    for (int j = 0; j < 3; ++j) {
      ctx.Require(si + j);
      const DataType want = j == 0 ? DataType::kFloat32 : DataType::kInt64;
      if (ctx.input_type(si + j) != want)
        ctx.Fail(std::string("the ") + names[j] + " input must be " + DataTypeName(want) + ", got " +
                 DataTypeName(ctx.input_type(si + j)));
      if (!IsScalarShape(ctx.input_shape(si + j)))
        ctx.Fail(std::string("the ") + names[j] + " input must be a scalar, got shape " +
                 ctx.input_shape(si + j).ToString());
      if (ctx.has_output(so + j)) ctx.set_output(so + j, want, ctx.input_shape(si + j));
    }
  }
  const int base = l.step_out();
  if (ctx.has_output(base)) ctx.set_output(base, DataType::kInt64, Shape::Static({}));
  if (ctx.has_output(base + 1)) ctx.set_output(base + 1, DataType::kFloat32, Shape::Static({}));
  if (ctx.has_output(base + 2)) ctx.set_output(base + 2, DataType::kBool, Shape::Static({}));
  if (l.stats) {
    if (ctx.has_output(l.param_norm_out())) ctx.set_output(l.param_norm_out(), DataType::kFloat32, Shape::Static({}));
    if (ctx.has_output(l.zero_fraction_out()))
      ctx.set_output(l.zero_fraction_out(), DataType::kFloat32, Shape::Static({}));
  }
}

}  // namespace

void RegisterOptimizerOps(OpRegistry& r) {
  OpSchema s;
  s.op_type = "OptimizerUpdate";
  s.domain = kInternalDomain;
  s.infer = InferOptimizerUpdate;
  // The optimizer runs in fp32: master weights, moments and the unscaled gradients never leave float32.
  s.amp = AmpClass::kDeny;
  r.Register(s);
}

}  // namespace ot
