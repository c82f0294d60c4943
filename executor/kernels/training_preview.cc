// CPU kernels of the ai.onnx.preview.training optimizers (graph/ops/training_preview.cc): adapt a node's
// R, T, X.., G.., states.. operands to cpu_ops/training_preview.h, one call per tensor.
#include "cpu_ops/training_preview.h"

#include <string>
#include <vector>

#include "executor/kernel_registry.h"

namespace ot {

namespace {

constexpr const char* kPreviewDomain = "ai.onnx.preview.training";

struct Layout {
  int n = 0;
  std::vector<int64_t> numel;
  std::vector<bool> f64;
  bool r64 = false;
};

// Validates R, T and the per-tensor sizes/dtypes; `per` = 2 + states operands per tensor.
Layout CheckLayout(const KernelContext& ctx, int per) {
  Layout l;
  l.n = (static_cast<int>(ctx.inputs.size()) - 2) / per;
  if (l.n < 1 || static_cast<int>(ctx.inputs.size()) != 2 + per * l.n) ctx.Fail("wrong number of inputs");
  ctx.RequireDType(0, {DataType::kFloat32, DataType::kFloat64});
  ctx.RequireDType(1, {DataType::kInt64});
  if (ctx.in(0).numel() != 1) ctx.Fail("R (learning rate) must hold one value");
  if (ctx.in(1).numel() != 1) ctx.Fail("T (iteration count) must hold one value");
  l.r64 = ctx.in(0).dtype == DataType::kFloat64;
  for (int i = 0; i < l.n; ++i) {
    const TensorDesc& x = ctx.in(2 + i);
    ctx.RequireDType(2 + i, {DataType::kFloat32, DataType::kFloat64});
    for (int j = 1; j < per; ++j) {
      const TensorDesc& o = ctx.in(2 + j * l.n + i);
      if (o.dtype != x.dtype || o.dims != x.dims)
        ctx.Fail("input " + std::to_string(2 + j * l.n + i) + " (" + DataTypeName(o.dtype) + DimsToString(o.dims) +
                 ") does not match its X (" + DataTypeName(x.dtype) + DimsToString(x.dims) + ")");
    }
    l.numel.push_back(x.numel());
    l.f64.push_back(x.dtype == DataType::kFloat64);
  }
  return l;
}

double LearningRate(const KernelIO& io, bool r64) {
  return r64 ? *io.In<double>(0) : static_cast<double>(*io.In<float>(0));
}

KernelInfo AdagradKernel(const KernelContext& ctx) {
  const Layout l = CheckLayout(ctx, 3);
  cpu::AdagradAttrs a;
  a.decay_factor = ctx.node.attr_float("decay_factor", 0.0f);
  a.epsilon = ctx.node.attr_float("epsilon", 1e-6f);
  a.norm_coefficient = ctx.node.attr_float("norm_coefficient", 0.0f);
  KernelInfo k;
  k.fn = [=](const KernelIO& io) {
    const double r = LearningRate(io, l.r64);
    const int64_t t = *io.In<int64_t>(1);
    const int n = l.n;
    for (int i = 0; i < n; ++i)
      cpu::PreviewAdagrad(a, r, t, l.numel[i], l.f64[i], io.in[2 + i], io.in[2 + n + i], io.in[2 + 2 * n + i],
                          io.out[i], io.out[n + i]);
  };
  return k;
}

KernelInfo AdamKernel(const KernelContext& ctx) {
  const Layout l = CheckLayout(ctx, 4);
  cpu::AdamAttrs a;
  a.alpha = ctx.node.attr_float("alpha", 0.9f);
  a.beta = ctx.node.attr_float("beta", 0.999f);
  a.epsilon = ctx.node.attr_float("epsilon", 1e-6f);
  a.norm_coefficient = ctx.node.attr_float("norm_coefficient", 0.0f);
  a.norm_coefficient_post = ctx.node.attr_float("norm_coefficient_post", 0.0f);
  KernelInfo k;
  k.fn = [=](const KernelIO& io) {
    const double r = LearningRate(io, l.r64);
    const int64_t t = *io.In<int64_t>(1);
    const int n = l.n;
    for (int i = 0; i < n; ++i)
      cpu::PreviewAdam(a, r, t, l.numel[i], l.f64[i], io.in[2 + i], io.in[2 + n + i], io.in[2 + 2 * n + i],
                       io.in[2 + 3 * n + i], io.out[i], io.out[n + i], io.out[2 * n + i]);
  };
  return k;
}

KernelInfo MomentumKernel(const KernelContext& ctx) {
  const Layout l = CheckLayout(ctx, 3);
  cpu::MomentumAttrs a;
  for (const char* name : {"alpha", "beta", "mode", "norm_coefficient"})
    if (!ctx.node.has_attr(name)) ctx.Fail(std::string("required attribute '") + name + "' is missing");
  a.alpha = ctx.node.attr_float("alpha", 0.0f);
  a.beta = ctx.node.attr_float("beta", 0.0f);
  a.norm_coefficient = ctx.node.attr_float("norm_coefficient", 0.0f);
  const std::string mode = ctx.node.attr_string("mode", "");
  if (mode != "standard" && mode != "nesterov") ctx.Fail("mode must be 'standard' or 'nesterov', not '" + mode + "'");
  a.nesterov = mode == "nesterov";
  KernelInfo k;
  k.fn = [=](const KernelIO& io) {
    const double r = LearningRate(io, l.r64);
    const int64_t t = *io.In<int64_t>(1);
    const int n = l.n;
    for (int i = 0; i < n; ++i)
      cpu::PreviewMomentum(a, r, t, l.numel[i], l.f64[i], io.in[2 + i], io.in[2 + n + i], io.in[2 + 2 * n + i],
                           io.out[i], io.out[n + i]);
  };
  return k;
}

}  // namespace

void RegisterTrainingPreviewKernels(KernelRegistry& r) {
  r.Register("Adagrad", AdagradKernel, kPreviewDomain);
  r.Register("Adam", AdamKernel, kPreviewDomain);
  r.Register("Momentum", MomentumKernel, kPreviewDomain);
}

}  // namespace ot
