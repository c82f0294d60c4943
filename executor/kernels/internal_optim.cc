// CPU kernel of OptimizerUpdate (graph/ops/internal_optim.cc): adapts the node to cpu::MultiTensorUpdate.
// Operand positions come from graph/ops/optimizer_layout.h. Loss scaling: the kernel reads S, passes 1/S as the
// gradient scale, and after the update applies LossScaleUpdate (kernel_common/optim_math.h) for "dynamic"; a
// micro-step that only accumulated, and every "static" step, copies S, good and bad unchanged.
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "cpu_ops/optimizer.h"
#include "dist/comm.h"
#include "executor/kernel_registry.h"
#include "executor/kernels/sharded_optim.h"
#include "graph/graph.h"
#include "graph/ops/optimizer_layout.h"
#include "graph/tensor.h"
#include "kernel_common/half.h"
#include "kernel_common/optim_math.h"

namespace ot {

namespace {

// Data-parallel accumulation, at the K-th micro-step: each tensor's sum acc + g * scale (what the update would take
// the mean of) into s32 / s64, summed over the ranks (dist/comm.h), divided by ranks x K: the mean gradient of the
// global batch. Each tensor then reads it as its gradient, without an accumulator (its sum is zeroed, as the K-th
// micro-step leaves it).
void ReduceSums(std::vector<cpu::OptimTensor>& ts, double scale, float* s32, double* s64, int world, int64_t k) {
  int64_t o32 = 0, o64 = 0;
  for (const cpu::OptimTensor& t : ts) {
    if (t.f64) {
      const double* a = static_cast<const double*>(t.acc);
      const double* g = static_cast<const double*>(t.g);
      for (int64_t e = 0; e < t.n; ++e) s64[o64 + e] = a[e] + g[e] * scale;
      o64 += t.n;
    } else {
      const float* a = static_cast<const float*>(t.acc);
      const float* g = static_cast<const float*>(t.g);
      const uint16_t* gh = static_cast<const uint16_t*>(t.g);  // a half gradient (t.grad_half)
      for (int64_t e = 0; e < t.n; ++e) {
        const float ge = t.grad_half == cpu::HalfKind::kNone       ? g[e]
                         : t.grad_half == cpu::HalfKind::kBFloat16 ? Bf16BitsToFloat(gh[e])
                                                                   : HalfBitsToFloat(gh[e]);
        s32[o32 + e] = static_cast<float>(a[e] + static_cast<double>(ge) * scale);
      }
      o32 += t.n;
    }
  }
  dist::Comm& c = dist::World();
  if (o32 > 0) c.AllReduceSum(s32, o32);
  if (o64 > 0) c.AllReduceSum(s64, o64);
  const double inv = 1.0 / (static_cast<double>(world) * static_cast<double>(k));
  o32 = o64 = 0;
  for (cpu::OptimTensor& t : ts) {
    if (t.f64) {
      for (int64_t e = 0; e < t.n; ++e) s64[o64 + e] *= inv;
      t.g = s64 + o64;
      o64 += t.n;
    } else {
      for (int64_t e = 0; e < t.n; ++e) s32[o32 + e] = static_cast<float>(static_cast<double>(s32[o32 + e]) * inv);
      t.g = s32 + o32;
      t.grad_half = cpu::HalfKind::kNone;
      o32 += t.n;
    }
    if (t.acc_out) std::memset(t.acc_out, 0, static_cast<size_t>(t.n) * (t.f64 ? 8 : 4));
    t.acc = t.acc_out = nullptr;
  }
}

KernelInfo OptimizerUpdateKernel(const KernelContext& ctx) {
  OptimizerHyperparams a;
  if (const std::string why = OptimizerHyperparams::Decode(ctx.node, &a); !why.empty()) ctx.Fail(why);
  cpu::OptimHyper h;
  h.kind = a.kind;
  h.beta1 = a.beta1;
  h.beta2 = a.beta2;
  h.eps = a.eps;
  h.weight_decay = a.weight_decay;
  h.momentum = a.momentum;
  h.clip_grad_norm = a.max_grad_norm;
  const int n = static_cast<int>(ctx.node.attr_int("num_params", 0));
  const int k = cpu::OptimStatesPerParam(h.kind);
  const OptimizerLayout l = OptimizerLayout::Of(ctx.node);
  // The schema's inference validated the layout when the plan was made; these checks guard direct callers.
  if (l.k != k || static_cast<int>(ctx.inputs.size()) != l.num_inputs() ||
      static_cast<int>(ctx.outputs.size()) != l.num_outputs())
    ctx.Fail("operand counts do not match the attributes (" + std::to_string(l.num_inputs()) + " inputs and " +
             std::to_string(l.num_outputs()) + " outputs expected)");
  const DataType lr_t = ctx.in(0).dtype;
  if (lr_t != DataType::kFloat32 && lr_t != DataType::kFloat64)
    ctx.Unsupported("learning rate of " + DataTypeName(lr_t));
  if (ctx.in(0).numel() != 1 || ctx.in(1).numel() != 1) ctx.Fail("lr and step must be scalars");
  if (l.sharded()) {
    // --shard-optimizer: this rank's slices, then the all-gather (executor/kernels/sharded_optim.h).
    auto u = std::make_shared<const ShardedUpdate>(ShardedUpdate::Make(ctx, a, h));
    KernelInfo info;
    info.workspace_bytes = u->workspace_bytes();
    for (int i = 0; i < n; ++i) {
      if (ctx.node.has_input(l.param_in(i))) AllowInPlace(info, ctx, l.param_out(i), l.param_in(i));
      if (l.accumulating()) AllowInPlace(info, ctx, l.acc_out(i), l.acc_in(i));
    }
    for (int j = 0; j < k; ++j) AllowInPlace(info, ctx, l.state_out(j, 0), l.state_in(j, 0));
    if (l.shard_master) AllowInPlace(info, ctx, l.master_out(), l.master_in());
    AllowInPlace(info, ctx, l.step_out(), 1);
    if (l.accumulating()) AllowInPlace(info, ctx, l.micro_out(), l.micro_in());
    if (l.scaling())
      for (int j = 0; j < 3; ++j) AllowInPlace(info, ctx, l.scale_out() + j, l.scale_in() + j);
    info.fn = [u](const KernelIO& io) { u->Run(io); };
    return info;
  }
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
  // A float32 parameter's gradient may be half (passes/half_grad_update.h): read as it is, widened per chunk.
  std::vector<cpu::HalfKind> grad_half(n, cpu::HalfKind::kNone);
  for (int i = 0; i < n; ++i) {
    const DataType gt = ctx.in(l.grad_in(i)).dtype;
    if (gt == DataType::kFloat16 || gt == DataType::kBFloat16) {
      if (f64[i]) ctx.Unsupported("a half gradient of a float64 parameter");
      grad_half[i] = gt == DataType::kBFloat16 ? cpu::HalfKind::kBFloat16 : cpu::HalfKind::kFloat16;
    }
  }
  std::vector<cpu::HalfKind> half(n, cpu::HalfKind::kNone);
  std::vector<int> half_slot(n, -1);  // output index of parameter i's half copy
  for (int j = 0; j < l.m(); ++j) {
    const int64_t i = l.half_params[j];
    if (i < 0 || i >= n) ctx.Fail("half_params[" + std::to_string(j) + "] = " + std::to_string(i) + " is out of range");
    if (f64[i]) ctx.Unsupported("a half copy of a float64 parameter");
    half[i] =
        l.half_dtype == static_cast<int64_t>(DataType::kBFloat16) ? cpu::HalfKind::kBFloat16 : cpu::HalfKind::kFloat16;
    half_slot[i] = l.half_out(j);
  }
  const bool scaling = l.scaling(), dynamic = l.loss_scaling == "dynamic";
  const int scale_in = l.scale_in(), scale_out = l.scale_out();
  if (scaling)
    for (int j = 0; j < 3; ++j)
      if (ctx.in(scale_in + j).numel() != 1) ctx.Fail("the loss-scale state must be scalars");
  const float growth = a.growth_factor, backoff = a.backoff_factor, min_scale = a.min_scale;
  const int64_t interval = a.growth_interval, overflows = a.overflows_to_backoff;
  const bool stats = l.stats;
  const int norm_out = l.param_norm_out(), zero_out = l.zero_fraction_out();
  const int base = l.step_out();
  const int64_t accumulate = l.accumulate;
  const int schedule = a.lr_schedule;
  const int64_t warmup = a.warmup, total = a.total_steps;
  const int acc_in = l.micro_in(), acc_out = l.micro_out();  // micro-step counter, then the n sums
  // Data-parallel with accumulation: the K-th micro-step averages each sum (acc + g / S) over the ranks, in a
  // workspace buffer (float32 sums, then float64 ones), and updates with those means.
  const int world = static_cast<int>(ctx.node.attr_int("world", 1));
  int64_t f32_total = 0, f64_total = 0;
  for (int i = 0; i < n; ++i) (f64[i] ? f64_total : f32_total) += numel[i];
  const bool reduce = world > 1 && accumulate > 1;
  KernelInfo info;
  const size_t info_bytes = static_cast<size_t>(f32_total) * 4 + static_cast<size_t>(f64_total) * 8 + 64;
  if (reduce) info.workspace_bytes = info_bytes;
  // In place (the plan writes the next state into the state's own storage): every operand's element i is read
  // before element i of its next value is written, in the same chunk -- the update loops (UpdateChunk) and the
  // skipped/accumulating copy (CopyChunk) alike; the scalars (step, micro-step, loss-scale state) are read into
  // locals before any output is written. Not LAMB's parameters: its second stage reads the old parameter after
  // the first wrote the update direction into p_out.
  for (int i = 0; i < n; ++i) {
    if (h.kind != cpu::OptimKind::kLamb) AllowInPlace(info, ctx, i, 2 + i);
    if (k >= 1) AllowInPlace(info, ctx, n + i, 2 + 2 * n + i);
    if (k >= 2) AllowInPlace(info, ctx, 2 * n + i, 2 + 3 * n + i);
    if (accumulate > 1) AllowInPlace(info, ctx, acc_out + 1 + i, acc_in + 1 + i);
  }
  AllowInPlace(info, ctx, base, 1);
  if (accumulate > 1) AllowInPlace(info, ctx, acc_out, acc_in);
  if (scaling)
    for (int j = 0; j < 3; ++j) AllowInPlace(info, ctx, scale_out + j, scale_in + j);
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
      t.grad_half = grad_half[i];
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
      if (half_slot[i] >= 0 && io.out[half_slot[i]]) {
        t.half = half[i];
        t.half_out = io.out[half_slot[i]];
      }
    }
    const int64_t micro = accumulate > 1 ? *io.In<int64_t>(acc_in) : 0;
    cpu::OptimStepOptions x;
    x.stats = stats;
    float scale = 1.f;
    if (scaling) {
      scale = *io.In<float>(scale_in);
      x.grad_scale = 1.0 / static_cast<double>(scale);
    }
    const bool last = reduce && micro == accumulate - 1;
    std::vector<uint8_t> own;
    if (last) {
      uint8_t* ws = static_cast<uint8_t*>(io.workspace);
      if (!ws) {
        own.resize(info_bytes);
        ws = own.data();
      }
      float* s32 = reinterpret_cast<float*>(ws);
      double* s64 = reinterpret_cast<double*>(ws + (f32_total * 4 + 7) / 8 * 8);
      ReduceSums(ts, x.grad_scale, s32, s64, world, accumulate);
      x.grad_scale = 1.0;
    }
    const cpu::OptimResult r = last ? cpu::MultiTensorUpdate(h, lr, step, ts, 1, 0, x)
                                    : cpu::MultiTensorUpdate(h, lr, step, ts, accumulate, micro, x);
    if (accumulate > 1 && io.out[acc_out]) *io.Out<int64_t>(acc_out) = r.micro;
    if (io.out[base]) *io.Out<int64_t>(base) = r.step;
    // A micro-step that only accumulated reports no norm (NaN), and is not a skipped step.
    if (io.out[base + 1])
      *io.Out<float>(base + 1) = r.applied ? static_cast<float>(r.grad_norm) : std::numeric_limits<float>::quiet_NaN();
    if (io.out[base + 2]) *io.Out<bool>(base + 2) = r.skipped;
    if (scaling) {
      int64_t good = *io.In<int64_t>(scale_in + 1), bad = *io.In<int64_t>(scale_in + 2);
      // An optimizer step moves the scale, whether applied or skipped (r.applied is false only for a micro-step
      // that accumulated); a static scale never moves.
      if (dynamic && r.applied)
        LossScaleUpdate<float>(!r.skipped, scale, good, bad, growth, backoff, interval, overflows, min_scale);
      if (io.out[scale_out]) *io.Out<float>(scale_out) = scale;
      if (io.out[scale_out + 1]) *io.Out<int64_t>(scale_out + 1) = good;
      if (io.out[scale_out + 2]) *io.Out<int64_t>(scale_out + 2) = bad;
    }
    if (stats) {
      if (io.out[norm_out]) *io.Out<float>(norm_out) = static_cast<float>(r.param_norm);
      if (io.out[zero_out]) *io.Out<float>(zero_out) = static_cast<float>(r.zero_fraction);
    }
  };
  return info;
}

}  // namespace

void RegisterOptimizerKernels(KernelRegistry& r) {
  r.Register("OptimizerUpdate", OptimizerUpdateKernel, kInternalDomain);
}

}  // namespace ot
