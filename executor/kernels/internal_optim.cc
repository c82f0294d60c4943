// CPU kernel of OptimizerUpdate (graph/ops/internal_optim.cc): adapts the node to cpu::MultiTensorUpdate.
#include <cstring>
#include <limits>
#include <vector>

#include "cpu_ops/optimizer.h"
#include "executor/kernel_registry.h"
#include "kernel_common/optim_math.h"
#include "graph/grad_context.h"
#include "graph/tensor.h"

namespace ot {

namespace {

KernelInfo OptimizerUpdateKernel(const KernelContext& ctx) {
  const std::string kind = ctx.node.attr_string("kind", "");
  cpu::OptimHyper h;
  if (kind == "sgd") h.kind = cpu::OptimKind::kSgd;
  else if (kind == "momentum") h.kind = cpu::OptimKind::kMomentum;
  else if (kind == "nesterov") h.kind = cpu::OptimKind::kNesterov;
  else if (kind == "adam") h.kind = cpu::OptimKind::kAdam;
  else if (kind == "adamw") h.kind = cpu::OptimKind::kAdamW;
  else if (kind == "lamb") h.kind = cpu::OptimKind::kLamb;
  else ctx.Fail("unknown optimizer kind '" + kind + "'");
  const Attribute* hp = ctx.node.attr("hyperparameters");
  if (!hp || hp->kind != Attribute::Kind::kTensor || hp->t.numel() != 6)
    ctx.Fail("attribute hyperparameters must be a tensor of 6 values");
  h.beta1 = hp->t.GetDouble(0);
  h.beta2 = hp->t.GetDouble(1);
  h.eps = hp->t.GetDouble(2);
  h.weight_decay = hp->t.GetDouble(3);
  h.momentum = hp->t.GetDouble(4);
  h.clip_grad_norm = hp->t.GetDouble(5);
  const int n = static_cast<int>(ctx.node.attr_int("num_params", 0));
  const int k = cpu::OptimStatesPerParam(h.kind);
  const DataType lr_t = ctx.in(0).dtype;
  if (lr_t != DataType::kFloat32 && lr_t != DataType::kFloat64) ctx.Unsupported("learning rate of " + DataTypeName(lr_t));
  if (ctx.in(0).numel() != 1 || ctx.in(1).numel() != 1) ctx.Fail("lr and step must be scalars");
  std::vector<int64_t> numel(n);
  std::vector<bool> f64(n);
  for (int i = 0; i < n; ++i) {
    const DataType t = ctx.in(2 + i).dtype;
    if (t != DataType::kFloat32 && t != DataType::kFloat64)
      ctx.Unsupported("optimizer update of " + DataTypeName(t) + " parameters");
    numel[i] = ctx.in(2 + i).numel();
    f64[i] = t == DataType::kFloat64;
    for (int j = 1; j < 2 + k; ++j)
      if (ctx.in(2 + j * n + i).numel() != numel[i])
        ctx.Fail("gradient/state of parameter " + std::to_string(i) + " has another size than the parameter");
  }
  const int base = (1 + k) * n;
  const int64_t accumulate = ctx.node.attr_int("accumulate", 1);
  const int schedule = static_cast<int>(ctx.node.attr_int("lr_schedule", 0));
  const int64_t warmup = ctx.node.attr_int("warmup", 0), total = ctx.node.attr_int("total_steps", 0);
  const int acc_in = 2 + (2 + k) * n, acc_out = base + 3;  // micro-step counter, then the n sums
  KernelInfo info;
  info.fn = [=](const KernelIO& io) {
    const double base_lr = lr_t == DataType::kFloat64 ? *io.In<double>(0) : static_cast<double>(*io.In<float>(0));
    const int64_t step = *io.In<int64_t>(1);
    const double lr = base_lr * LrScheduleFactor(schedule, step, warmup, total);
    std::vector<cpu::OptimTensor> ts(n);
    for (int i = 0; i < n; ++i) {
      cpu::OptimTensor& t = ts[i];
      t.n = numel[i];
      t.f64 = f64[i];
      t.p = io.in[2 + i];
      t.g = io.in[2 + n + i];
      t.p_out = io.out[i];
      if (k >= 1) {
        t.s0 = io.in[2 + 2 * n + i];
        t.s0_out = io.out[n + i];
      }
      if (k >= 2) {
        t.s1 = io.in[2 + 3 * n + i];
        t.s1_out = io.out[2 * n + i];
      }
      if (accumulate > 1) {
        t.acc = io.in[acc_in + 1 + i];
        t.acc_out = io.out[acc_out + 1 + i];
      }
    }
    const int64_t micro = accumulate > 1 ? *io.In<int64_t>(acc_in) : 0;
    const cpu::OptimResult r = cpu::MultiTensorUpdate(h, lr, step, ts, accumulate, micro);
    if (accumulate > 1 && io.out[acc_out]) *io.Out<int64_t>(acc_out) = r.micro;
    if (io.out[base]) *io.Out<int64_t>(base) = r.step;
    // A micro-step that only accumulated reports no norm (NaN), and is not a skipped step.
    if (io.out[base + 1])
      *io.Out<float>(base + 1) = r.applied ? static_cast<float>(r.grad_norm) : std::numeric_limits<float>::quiet_NaN();
    if (io.out[base + 2]) *io.Out<bool>(base + 2) = r.skipped;
  };
  return info;
}

}  // namespace

void RegisterOptimizerKernels(CpuKernelRegistry& r) {
  r.Register("OptimizerUpdate", OptimizerUpdateKernel, kInternalDomain);
}

}  // namespace ot
