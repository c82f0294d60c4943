// Pooling on the GPU through cuDNN (cuda_ops/cudnn_pool.h): MaxPool, AveragePool, GlobalMaxPool,
// GlobalAveragePool and the backward ops ai.onnxtrain.MaxPoolGrad / AveragePoolGrad. The geometry is the CPU
// kernels' (PoolGeometry: kernel_shape, strides, dilations, pads, auto_pad, ceil_mode, count_include_pad), so both
// backends read the attributes one way; what cuDNN cannot express (dilations, padding or ceil_mode that change the
// output size from the symmetric-padding one, count_include_pad windows past the end padding, MaxPool's Indices
// output) is refused with UnsupportedError naming the node and the reason. --deterministic makes max pooling's
// backward add overlapping windows in a fixed order. LpPool and GlobalLpPool (forward only: the registry has no
// gradient rule for them) run our own kernels (cuda_ops/lp_pool.h) on the same geometry, with none of cuDNN's limits
// (dilations, asymmetric pads and ceil_mode all run).
#include <string>
#include <utility>

#include "cpu_ops/pool.h"
#include "cuda_ops/cudnn_pool.h"
#include "cuda_ops/lp_pool.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/device.h"
#include "executor/kernels/pool_geometry.h"
#include "graph/graph.h"

namespace ot {
namespace {

// The geometry of a spec into a PoolDesc or an LpPoolDesc (the same fields).
template <typename Desc>
void FillPoolDesc(const cpu::PoolSpec& s, Desc& d) {
  d.n = s.n;
  d.c = s.c;
  d.in_spatial = s.in_spatial;
  d.out_spatial = s.out_spatial;
  d.kernel = s.kernel;
  d.strides = s.strides;
  d.dilations = s.dilations;
  d.pad_begin = s.pad_begin;
  d.pad_end = s.pad_end;
}

cuda::PoolDesc DescOf(const KernelContext& ctx, const cpu::PoolSpec& s, DataType t) {
  cuda::PoolDesc d;
  d.type = DeviceFloatType(ctx, t, ctx.node.op_type);
  d.mode = s.kind == cpu::PoolKind::kMax ? cuda::PoolMode::kMax
           : s.count_include_pad         ? cuda::PoolMode::kAvgIncludePad
                                         : cuda::PoolMode::kAvgExcludePad;
  d.deterministic = ctx.device && ctx.device->options().deterministic;
  FillPoolDesc(s, d);
  try {
    cuda::ValidatePool(d);
  } catch (const std::invalid_argument& e) {
    ctx.Unsupported(std::string("a pooling cuDNN cannot describe: ") + e.what());
  }
  const std::string why = cuda::PoolUnsupportedReason(d);
  if (!why.empty()) ctx.Unsupported(why + " on the GPU (run it with --device cpu)");
  return d;
}

void RequireRank(const KernelContext& ctx, const std::vector<int64_t>& x) {
  const int r = static_cast<int>(x.size()) - 2;
  if (r < 1) ctx.Fail("input must have rank >= 3");
  if (r > 3) ctx.Unsupported(std::to_string(r) + "-D pooling on the GPU (1-D to 3-D are)");
}

bool Empty(const std::vector<int64_t>& v) {
  for (int64_t d : v)
    if (d == 0) return true;
  return false;
}

// MaxPool / AveragePool / GlobalMaxPool / GlobalAveragePool (X) -> Y
KernelInfo PoolKernel(const KernelContext& ctx) {
  const std::string& op = ctx.node.op_type;
  const bool global = op.rfind("Global", 0) == 0;
  const bool max = op.find("Max") != std::string::npos;
  const auto& x = ctx.in(0).dims;
  RequireRank(ctx, x);
  if (ctx.has_output(1)) ctx.Unsupported("MaxPool's Indices output on the GPU (cuDNN does not return positions)");
  const cpu::PoolSpec s =
      PoolGeometry(ctx, max ? cpu::PoolKind::kMax : cpu::PoolKind::kAvg, x, ctx.out(0).dims, global);
  if (ctx.node.attr_int("channels_last", 0) != 0) ctx.Unsupported("a channels-last pooling on the GPU");
  if (ctx.out(0).dtype != ctx.in(0).dtype) ctx.Fail("Y's dtype differs from X's");
  if (ctx.out(0).numel() == 0) return MakeInfo([](const KernelIO&) {});
  if (Empty(x)) ctx.Unsupported("pooling an empty input into a non-empty output on the GPU");
  const cuda::PoolDesc d = DescOf(ctx, s, ctx.in(0).dtype);
  const size_t ws = cuda::PoolForwardWorkspaceBytes(d);
  const std::string what = ctx.node.Describe();
  KernelInfo info = MakeInfo([=](const KernelIO& io) {
    RunLauncher(what, [&] { cuda::PoolForward(d, io.in[0], io.out[0], io.workspace, ws, io.stream); });
  });
  info.workspace_bytes = ws;
  return info;
}

// MaxPoolGrad(dY, X) -> dX and AveragePoolGrad(dY, shape(X)) -> dX (the forward's attributes, copied).
KernelInfo PoolGradKernel(const KernelContext& ctx, bool max) {
  if (ctx.node.attr_int("relu", 0) != 0) ctx.Unsupported("relu = 1 (the CPU's folded ReluGrad)");
  const DataType t = ctx.in(0).dtype;
  if (ctx.out(0).dtype != t || (max && ctx.in(1).dtype != t)) ctx.Fail("dY, X and dX must share a dtype");
  const auto& x = ctx.out(0).dims;
  const auto& y = ctx.in(0).dims;
  RequireRank(ctx, x);
  if (y.size() != x.size()) ctx.Fail("X and dY must have the same rank");
  if (max && ctx.in(1).dims != x) ctx.Fail("X and dX shapes differ");
  const cpu::PoolSpec s =
      PoolGeometry(ctx, max ? cpu::PoolKind::kMax : cpu::PoolKind::kAvg, x, y, ctx.node.attr_int("global", 0) != 0);
  if (ctx.node.attr_int("channels_last", 0) != 0) ctx.Unsupported("a channels-last pooling gradient on the GPU");
  if (ctx.out(0).numel() == 0) return MakeInfo([](const KernelIO&) {});
  if (Empty(y)) ctx.Unsupported("a pooling gradient with an empty dY on the GPU");
  const cuda::PoolDesc d = DescOf(ctx, s, t);
  const size_t ws = cuda::PoolBackwardWorkspaceBytes(d);
  const std::string what = ctx.node.Describe();
  KernelInfo info = MakeInfo([=](const KernelIO& io) {
    RunLauncher(what, [&] {
      cuda::PoolBackward(d, io.in[0], max ? io.in[1] : nullptr, io.out[0], io.workspace, ws, io.stream);
    });
  });
  info.workspace_bytes = ws;
  return info;
}

// LpPool / GlobalLpPool (X) -> Y. p: an int attribute (opset >= 2, default 2) or opset 1's float, which must be
// integral -- the CPU kernel's reading (linalg_pool.cc), so both backends accept the same nodes.
KernelInfo LpPoolKernel(const KernelContext& ctx) {
  const bool global = ctx.node.op_type == "GlobalLpPool";
  const auto& x = ctx.in(0).dims;
  RequireRank(ctx, x);
  if (ctx.out(0).dtype != ctx.in(0).dtype) ctx.Fail("Y's dtype differs from X's");
  const cpu::PoolSpec s = PoolGeometry(ctx, cpu::PoolKind::kLp, x, ctx.out(0).dims, global);
  int64_t p = 2;
  const Attribute* pa = ctx.node.attr("p");
  if (pa && pa->kind == Attribute::Kind::kFloat) {
    if (pa->f != static_cast<float>(static_cast<int64_t>(pa->f))) ctx.Unsupported("non-integer p");
    p = static_cast<int64_t>(pa->f);
  } else {
    p = ctx.node.attr_int("p", 2);
  }
  if (p < 1) ctx.Unsupported("p < 1");
  cuda::LpPoolDesc d;
  d.type = DeviceFloatType(ctx, ctx.in(0).dtype, ctx.node.op_type);
  d.p = p;
  FillPoolDesc(s, d);
  try {
    cuda::ValidateLpPool(d);
  } catch (const std::invalid_argument& e) {
    ctx.Unsupported(std::string("an Lp pooling the GPU kernel cannot run: ") + e.what());
  }
  if (ctx.out(0).numel() == 0) return MakeInfo([](const KernelIO&) {});
  const std::string what = ctx.node.Describe();
  return MakeInfo(
      [=](const KernelIO& io) { RunLauncher(what, [&] { cuda::LpPoolForward(d, io.in[0], io.out[0], io.stream); }); });
}

}  // namespace

void RegisterCudaPoolKernels(KernelRegistry& r) {
  for (const char* op : {"MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool"}) r.Register(op, PoolKernel);
  r.Register(
      "MaxPoolGrad", [](const KernelContext& c) { return PoolGradKernel(c, true); }, kInternalDomain);
  r.Register(
      "AveragePoolGrad", [](const KernelContext& c) { return PoolGradKernel(c, false); }, kInternalDomain);
  r.Register("LpPool", LpPoolKernel);
  r.Register("GlobalLpPool", LpPoolKernel);
}

}  // namespace ot
