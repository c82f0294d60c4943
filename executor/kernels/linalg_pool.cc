// CPU kernel factories of the pooling ops: MaxPool (with optional Indices), AveragePool, LpPool and their
// Global* forms, all on cpu_ops/pool.h's loops (float, float64, float16, bfloat16; MaxPool also int8/uint8).
#include <type_traits>

#include "cpu_ops/pool.h"
#include "executor/kernel_registry.h"
#include "executor/kernels/conv_geometry.h"
#include "executor/kernels/pool_geometry.h"
#include "graph/ops/linalg_util.h"
#include "graph/tensor.h"

namespace ot {

cpu::PoolSpec PoolGeometry(const KernelContext& ctx, cpu::PoolKind kind, const std::vector<int64_t>& x_stored,
                           const std::vector<int64_t>& y_stored, bool global) {
  const Node& node = ctx.node;
  // channels_last = 1 (the channels_last pass): X and Y stored [N, spatial..., C]; the geometry reads [N, C, ...].
  const bool last = node.attr_int("channels_last", 0) != 0;
  const std::vector<int64_t> x = last ? ChannelsFirst(x_stored) : x_stored;
  const std::vector<int64_t> y = last ? ChannelsFirst(y_stored) : y_stored;
  const int r = static_cast<int>(x.size()) - 2;
  cpu::PoolSpec spec;
  spec.kind = kind;
  spec.n = x[0];
  spec.c = x[1];
  spec.in_spatial.assign(x.begin() + 2, x.end());
  spec.out_spatial.assign(y.begin() + 2, y.end());
  if (global) {
    spec.kernel = spec.in_spatial;
    spec.strides = spec.dilations = std::vector<int64_t>(r, 1);
    spec.pad_begin = spec.pad_end = std::vector<int64_t>(r, 0);
  } else {
    spec.kernel = node.attr_ints("kernel_shape");
    spec.strides = node.attr_ints("strides", std::vector<int64_t>(r, 1));
    spec.dilations = node.attr_ints("dilations", std::vector<int64_t>(r, 1));
    const auto pads = node.attr_ints("pads", std::vector<int64_t>(2 * r, 0));
    const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
    const bool ceil_mode = node.attr_int("ceil_mode", 0) != 0;
    if (static_cast<int>(spec.kernel.size()) != r) ctx.Fail("kernel_shape must have one value per spatial dim");
    for (int i = 0; i < r; ++i) {
      const auto g = linalg::ConvAxis(x[2 + i], spec.kernel[i], spec.strides[i], spec.dilations[i], pads[i],
                                      pads[r + i], auto_pad, ceil_mode);
      if (g.out != spec.out_spatial[i]) ctx.Fail("output shape disagrees with the pooling geometry");
      spec.pad_begin.push_back(g.pad_begin);
      spec.pad_end.push_back(g.pad_end);
    }
  }
  spec.count_include_pad = node.attr_int("count_include_pad", 0) != 0;
  return spec;
}

namespace {

KernelInfo PoolKernel(const KernelContext& ctx) {
  const Node& node = ctx.node;
  const std::string& op = node.op_type;
  const bool global = op.rfind("Global", 0) == 0;
  const DataType t = ctx.in(0).dtype;
  const auto& x = ctx.in(0).dims;
  const auto& y = ctx.out(0).dims;
  const int r = static_cast<int>(x.size()) - 2;
  if (r < 1) ctx.Fail("input must have rank >= 3");
  if (r > 3) ctx.Unsupported(std::to_string(r) + "-D pooling is not supported (1-D to 3-D are)");
  const cpu::PoolKind kind = op.find("Max") != std::string::npos       ? cpu::PoolKind::kMax
                             : op.find("Average") != std::string::npos ? cpu::PoolKind::kAvg
                                                                       : cpu::PoolKind::kLp;
  cpu::PoolSpec spec = PoolGeometry(ctx, kind, x, y, global);
  spec.indices_col_major = node.attr_int("storage_order", 0) == 1;
  if (spec.kind == cpu::PoolKind::kLp) {
    const Attribute* p = node.attr("p");
    if (p && p->kind == Attribute::Kind::kFloat) {
      if (p->f != static_cast<float>(static_cast<int64_t>(p->f))) ctx.Unsupported("non-integer p");
      spec.p = static_cast<int64_t>(p->f);
    } else {
      spec.p = node.attr_int("p", 2);
    }
    if (spec.p < 1) ctx.Unsupported("p < 1");
  }
  const bool want_indices = ctx.has_output(1);
  if (want_indices && spec.kind != cpu::PoolKind::kMax) ctx.Fail("only MaxPool has an Indices output");
  const bool last = node.attr_int("channels_last", 0) != 0;
  if (last && (want_indices || spec.kind == cpu::PoolKind::kLp || global))
    ctx.Unsupported("channels_last for Indices, LpPool or a global pool");
  auto make = [&](auto tag) -> KernelInfo {
    using T = decltype(tag);
    KernelInfo k;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
      if (last) {
        k.fn = [spec](const KernelIO& io) { cpu::PoolLast<T>(spec, io.In<T>(0), io.Out<T>(0)); };
        return k;
      }
    }
    if (last) ctx.Unsupported("channels_last on " + DataTypeName(t));
    k.fn = [spec, want_indices](const KernelIO& io) {
      cpu::Pool<T>(spec, io.In<T>(0), io.Out<T>(0), want_indices ? io.Out<int64_t>(1) : nullptr);
    };
    return k;
  };
  switch (t) {
    case DataType::kFloat32:
      return make(float{});
    case DataType::kFloat64:
      return make(double{});
    case DataType::kFloat16:
      return make(float16{});
    case DataType::kBFloat16:
      return make(bfloat16{});
    default:
      break;
  }
  if (spec.kind == cpu::PoolKind::kMax) {
    if (t == DataType::kInt8) return make(int8_t{});
    if (t == DataType::kUint8) return make(uint8_t{});
  }
  ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported");
}

}  // namespace

void RegisterLinalgPoolKernels(KernelRegistry& r) {
  for (const char* op : {"MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
    r.Register(op, PoolKernel);
}

}  // namespace ot
