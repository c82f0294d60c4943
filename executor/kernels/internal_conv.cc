// CPU kernels of the conv/pool/gather backward internal ops (graph/grad/conv_grad.cc, graph/grad/data_grad.cc).
// float32 convolution backward runs through oneDNN (exclusive kernels); float64 and the pooling/gather
// backward use plain loops; bfloat16 convolution backward runs oneDNN's native kernels where it has them, float16
// (and bfloat16 elsewhere) and the pooling backward run the float32 kernels on widened operands and round the
// result once (cpu_ops/conv_grad.h, pool_grad.h, scatter_add.h).
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <vector>

#include "cpu_ops/conv_grad.h"
#include "cpu_ops/depthwise_grad.h"
#include "cpu_ops/dnnl_util.h"
#include "cpu_ops/patch_conv_grad.h"
#include "cpu_ops/pool_grad.h"
#include "cpu_ops/scatter_add.h"
#include "executor/kernel_registry.h"
#include "executor/kernels/conv_geometry.h"
#include "executor/kernels/pool_geometry.h"
#include "executor/threads.h"
#include "graph/graph.h"
#include "graph/infer_util.h"
#include "graph/ops/linalg_util.h"
#include "graph/tensor.h"

namespace ot {

// (executor/kernels/conv_geometry.h)
cpu::ConvSpec GradConvSpec(const KernelContext& ctx, const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                           const std::vector<int64_t>& y) {
  const Node& node = ctx.node;
  const int r = static_cast<int>(x.size()) - 2;
  if (r < 1 || static_cast<int>(w.size()) != r + 2 || static_cast<int>(y.size()) != r + 2)
    ctx.Fail("X, W and dY must have the same rank >= 3");
  if (r > 3) ctx.Unsupported(std::to_string(r) + "-D convolution is not supported (1-D to 3-D are)");
  cpu::ConvSpec spec;
  spec.group = node.attr_int("group", 1);
  spec.channels_last = node.attr_int("channels_last", 0) != 0;  // X, dY [N, spatial..., C]
  const std::vector<int64_t> xl = spec.channels_last ? ChannelsFirst(x) : x;
  const std::vector<int64_t> yl = spec.channels_last ? ChannelsFirst(y) : y;
  spec.n = xl[0];
  spec.c_in = xl[1];
  spec.c_out = yl[1];
  spec.in_spatial.assign(xl.begin() + 2, xl.end());
  spec.out_spatial.assign(yl.begin() + 2, yl.end());
  spec.kernel.assign(w.begin() + 2, w.end());
  spec.strides = node.attr_ints("strides", std::vector<int64_t>(r, 1));
  spec.dilations = node.attr_ints("dilations", std::vector<int64_t>(r, 1));
  const auto pads = node.attr_ints("pads", std::vector<int64_t>(2 * r, 0));
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (static_cast<int>(spec.strides.size()) != r || static_cast<int>(spec.dilations.size()) != r ||
      static_cast<int>(pads.size()) != 2 * r)
    ctx.Fail("strides, dilations or pads do not match the spatial rank");
  for (int i = 0; i < r; ++i) {
    const auto g = linalg::ConvAxis(xl[2 + i], spec.kernel[i], spec.strides[i], spec.dilations[i], pads[i], pads[r + i],
                                    auto_pad, false);
    if (g.out != spec.out_spatial[i]) ctx.Fail("dY's shape disagrees with the convolution geometry");
    spec.pad_begin.push_back(g.pad_begin);
    spec.pad_end.push_back(g.pad_end);
  }
  if (spec.group <= 0) ctx.Fail("group must be positive");
  if (w[1] * spec.group != spec.c_in || w[0] != spec.c_out) ctx.Fail("X's or dY's channels do not match W");
  if (spec.c_out % spec.group != 0 || spec.c_in % spec.group != 0) ctx.Fail("channels not divisible by group");
  return spec;
}

namespace {

void RequireFloat(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (t != DataType::kFloat32 && t != DataType::kFloat64)
    ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported (float, double are)");
}

bool IsHalf(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }
cpu::DnnType HalfDnnType(DataType t) { return t == DataType::kFloat16 ? cpu::DnnType::kF16 : cpu::DnnType::kBF16; }

// float32, float64, or (with allow_half) float16/bfloat16 for input 0 and every float input listed in `same`,
// which must share input 0's dtype.
void RequireFloatOrHalf(const KernelContext& ctx, std::initializer_list<int> same) {
  const DataType t = ctx.in(0).dtype;
  if (t != DataType::kFloat32 && t != DataType::kFloat64 && !IsHalf(t))
    ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported (float, double, float16, bfloat16 are)");
  for (int i : same)
    if (ctx.in(i).dtype != t)
      ctx.Fail("input " + std::to_string(i) + " has dtype " + DataTypeName(ctx.in(i).dtype) + ", expected " +
               DataTypeName(t) + " (dY's)");
}

// RunWidened's float copies in one planned workspace (KernelInfo::workspace_bytes: no allocation in the step; a
// 4-8 MB buffer per call cost page faults), each starting on a 64-byte line.
constexpr int64_t WidenedAt(int64_t n) { return (n + 15) / 16 * 16; }
constexpr int64_t WidenedFloats(int64_t n0, int64_t n1, int64_t n_out) {
  return WidenedAt(n0) + WidenedAt(n1) + WidenedAt(n_out);
}

// Runs `f32(in0, in1, out)` (a float32 kernel) on half operands: in0/in1 (n0/n1 elements; in1 may be absent
// with n1 = 0) are widened to float, the float result (n_out elements) is rounded once into out. The float
// kernels accumulate in float or better, so every sum stays fp32 inside. `workspace`: WidenedFloats floats, or null.
template <typename F>
void RunWidened(cpu::DnnType t, const void* in0, int64_t n0, const void* in1, int64_t n1, void* out, int64_t n_out,
                void* workspace, const F& f32) {
  std::unique_ptr<float[]> own;  // called outside a plan (KernelIO::workspace null): its own buffers
  if (!workspace) {
    own = cpu::NewFloats(WidenedFloats(n0, n1, n_out));
    workspace = own.get();
  }
  float *a = static_cast<float*>(workspace), *b = a + WidenedAt(n0), *o = b + WidenedAt(n1);
  cpu::ToFloat(t, in0, a, n0);
  if (n1) cpu::ToFloat(t, in1, b, n1);
  f32(a, b, o);
  cpu::FromFloat(t, o, out, n_out);
}

// A pooling gradient's (n, c) planes are independent: on half operands, `f32(spec_b, dy, x, dx)` (a float32 pooling
// gradient) runs on blocks of whole planes widened into buffers of about 256 KiB per operand -- the same bits as one
// call on the whole widened tensors, without three float copies of them. The blocks are split into `slots`
// contiguous runs, one task each (in parallel), each with its buffers in the kernel's planned workspace
// (PlaneWorkspace: no allocation during the step; its own buffers when called without one). x may be absent (null).
struct PlaneBlocks {
  int64_t planes = 0, in_sz = 0, out_sz = 0, block = 1, slots = 1;
  bool with_x = false;
  int64_t slot_floats() const { return block * ((with_x ? 2 : 1) * in_sz + out_sz); }
  size_t workspace_bytes() const { return static_cast<size_t>(slots * slot_floats()) * sizeof(float); }
};
PlaneBlocks PlaneWorkspace(const cpu::PoolSpec& spec, bool with_x) {
  constexpr int64_t kBlockFloats = int64_t{1} << 16;
  PlaneBlocks b;
  b.planes = spec.n * spec.c;
  b.in_sz = NumElements(spec.in_spatial);
  b.out_sz = NumElements(spec.out_spatial);
  b.block = std::clamp<int64_t>(kBlockFloats / std::max<int64_t>(b.in_sz, 1), 1, std::max<int64_t>(b.planes, 1));
  b.slots = std::clamp<int64_t>((b.planes + b.block - 1) / b.block, 1, std::max(ThreadCount(), 1));
  b.with_x = with_x;
  return b;
}
template <typename F>
void RunWidenedPlanes(cpu::DnnType t, const cpu::PoolSpec& spec, const PlaneBlocks& pb, const void* dy, const void* x,
                      void* dx, void* workspace, const F& f32) {
  std::unique_ptr<float[]> own;  // called outside a plan (KernelIO::workspace null): its own buffers
  if (!workspace) {
    own = cpu::NewFloats(pb.slots * pb.slot_floats());
    workspace = own.get();
  }
  const int64_t nblocks = (pb.planes + pb.block - 1) / pb.block;
  const int64_t per_slot = (nblocks + pb.slots - 1) / pb.slots;
  auto at = [](const void* p, int64_t elems) { return static_cast<const char*>(p) + elems * 2; };  // 2-byte halves
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, pb.slots, 1),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t slot = r.begin(); slot < r.end(); ++slot) {
          float* fy = static_cast<float*>(workspace) + slot * pb.slot_floats();
          float* fo = fy + pb.block * pb.out_sz;
          float* fx = fo + pb.block * pb.in_sz;
          cpu::PoolSpec sb = spec;  // a block's planes: one image of nb channels
          sb.n = 1;
          for (int64_t k = slot * per_slot; k < std::min(nblocks, (slot + 1) * per_slot); ++k) {
            const int64_t p0 = k * pb.block, nb = std::min(pb.block, pb.planes - p0);
            sb.c = nb;
            cpu::ToFloat(t, at(dy, p0 * pb.out_sz), fy, nb * pb.out_sz);
            if (x) cpu::ToFloat(t, at(x, p0 * pb.in_sz), fx, nb * pb.in_sz);
            f32(sb, fy, x ? fx : nullptr, fo);
            cpu::FromFloat(t, fo, static_cast<char*>(dx) + p0 * pb.in_sz * 2, nb * pb.in_sz);
          }
        }
      },
      tbb::simple_partitioner());
}

// ConvGradData(dY, W, shape(X)) -> dX and ConvGradWeight(dY, X, shape(W)) -> dW: one oneDNN backward primitive
// of `kind` over (dY, input 1) -> output 0. Half dY: bf16 runs oneDNN's native kernel where it has a jit one (AVX512;
// f32 accumulation, rounded once); otherwise (f16, or reference kernels only) the f32 primitive runs on widened copies
// and the result is rounded once. float64: the naive loops.
KernelInfo ConvBackwardKernel(const KernelContext& ctx, cpu::DnnlConvBackward::Kind kind) {
  RequireFloatOrHalf(ctx, {1});
  const bool data = kind == cpu::DnnlConvBackward::Kind::kData;
  const cpu::ConvSpec spec = data ? GradConvSpec(ctx, ctx.out(0).dims, ctx.in(1).dims, ctx.in(0).dims)
                                  : GradConvSpec(ctx, ctx.in(1).dims, ctx.out(0).dims, ctx.in(0).dims);
  KernelInfo info;
  if (ctx.in(0).dtype == DataType::kFloat64) {
    if (spec.channels_last) ctx.Unsupported("a channels-last float64 convolution (the reference loops read NCHW)");
    info.fn = [spec, data](const KernelIO& io) {
      if (data)
        cpu::NaiveConvGradData<double>(spec, io.In<double>(0), io.In<double>(1), io.Out<double>(0));
      else
        cpu::NaiveConvGradWeight<double>(spec, io.In<double>(0), io.In<double>(1), io.Out<double>(0));
    };
    return info;
  }
  info.exclusive = true;
  info.heap_bytes = cpu::DnnlCallHeapBytes(4);
  if (!data && IsHalf(ctx.in(0).dtype) && ctx.out(0).dtype == ctx.in(0).dtype && cpu::PatchGradWeightApplies(spec)) {
    cpu::ConvSpec hs = spec;
    hs.type = HalfDnnType(ctx.in(0).dtype);
    auto pg = std::make_shared<cpu::PatchConvGradWeight>(hs);
    info.workspace_bytes = pg->workspace_bytes();
    info.heap_bytes += pg->heap_bytes();
    info.fn = [pg](const KernelIO& io) { pg->Run(io.in[0], io.in[1], io.out[0], io.workspace); };
    return info;
  }
  bool half_gemm_depthwise = false;
  if (IsHalf(ctx.in(0).dtype)) {
    const cpu::DnnType t = HalfDnnType(ctx.in(0).dtype);
    cpu::ConvSpec hs = spec;
    hs.type = t;
    auto native = std::make_shared<cpu::DnnlConvBackward>(hs, kind);
    // A depthwise weight gradient oneDNN would run in its gemm-based implementation (every 5x5 one in bf16 too:
    // 472 ms of EfficientNet-B0's bf16 step for 18 calls) goes to cpu_ops/depthwise_grad.h below, on widened copies.
    const std::string impl = native->impl_name();
    // Channels-last: always (oneDNN runs those as one grouped jit_bf16 call per group: 25 ms for EfficientNet-B0's
    // 1152-channel 7x7 layer, where cpu_ops/depthwise_grad.h's loop along the channels takes a fraction).
    half_gemm_depthwise =
        !data && cpu::DepthwiseGradWeightApplies(spec) &&
        (spec.channels_last || impl.find("gemm") != std::string::npos || impl.find("ref") != std::string::npos);
    if (native->native() && !half_gemm_depthwise) {  // bf16 with a jit kernel: no widened copies
      info.fn = [native](const KernelIO& io) { native->Run(io.in[0], io.in[1], io.out[0]); };
      return info;
    }
  }
  auto bw = std::make_shared<cpu::DnnlConvBackward>(spec, kind);
  // A depthwise weight gradient that oneDNN would run with its gemm-based (or a reference) implementation -- it has
  // jit ones up to 3 wide only -- runs cpu_ops/depthwise_grad.h's kernel instead (a half one when the half primitive
  // is gemm-based, whatever the f32 one is).
  const std::string f32_impl = bw->impl_name();
  if (!data && cpu::DepthwiseGradWeightApplies(spec) &&
      (half_gemm_depthwise || spec.channels_last || f32_impl.find("gemm") != std::string::npos ||
       f32_impl.find("ref") != std::string::npos)) {
    if (IsHalf(ctx.in(0).dtype)) {
      const cpu::DnnType t = HalfDnnType(ctx.in(0).dtype);
      const int64_t ny = ctx.in(0).numel(), n1 = ctx.in(1).numel(), nout = ctx.out(0).numel();
      info.workspace_bytes = static_cast<size_t>(WidenedFloats(ny, n1, nout)) * sizeof(float);
      info.fn = [=](const KernelIO& io) {
        RunWidened(t, io.in[0], ny, io.in[1], n1, io.out[0], nout, io.workspace,
                   [&](const float* dy, const float* x, float* dw) { cpu::DepthwiseConvGradWeight(spec, dy, x, dw); });
      };
    } else {
      info.fn = [spec](const KernelIO& io) {
        cpu::DepthwiseConvGradWeight(spec, io.In<float>(0), io.In<float>(1), io.Out<float>(0));
      };
    }
    return info;
  }
  if (IsHalf(ctx.in(0).dtype)) {
    const cpu::DnnType t = HalfDnnType(ctx.in(0).dtype);
    const int64_t ny = ctx.in(0).numel(), n1 = ctx.in(1).numel(), nout = ctx.out(0).numel();
    info.workspace_bytes = static_cast<size_t>(WidenedFloats(ny, n1, nout)) * sizeof(float);  // the f32 copies
    info.fn = [=](const KernelIO& io) {
      RunWidened(t, io.in[0], ny, io.in[1], n1, io.out[0], nout, io.workspace,
                 [&](const float* dy, const float* in1, float* out) { bw->Run(dy, in1, out); });
    };
    return info;
  }
  info.fn = [bw](const KernelIO& io) { bw->Run(io.in[0], io.in[1], io.out[0]); };
  return info;
}

// Pooling geometry of a MaxPoolGrad/AveragePoolGrad node: X's dims are dX's, Y's are dY's; `global` = 1 (the
// gradient of GlobalMaxPool): one window over X's spatial dims, whatever they are when the plan is made.
cpu::PoolSpec GradPoolSpec(const KernelContext& ctx, cpu::PoolKind kind) {
  const auto& x = ctx.out(0).dims;
  const auto& y = ctx.in(0).dims;
  const int r = static_cast<int>(x.size()) - 2;
  if (r < 1 || y.size() != x.size()) ctx.Fail("X and dY must have the same rank >= 3");
  if (r > 3) ctx.Unsupported(std::to_string(r) + "-D pooling is not supported (1-D to 3-D are)");
  return PoolGeometry(ctx, kind, x, y, ctx.node.attr_int("global", 0) != 0);
}

// MaxPoolGrad(dY, X) {relu} -> dX. Half: dY and X widened (exact, so each window picks the same argmax), dX summed in
// float where windows overlap and rounded once. relu = 1 (passes/fuse_pool_relu.h): X is a Relu's output and dX the
// gradient of the Relu's input, dY routed only to argmaxes > 0 (a widened half X > 0 exactly where X > 0).
KernelInfo MaxPoolGradKernel(const KernelContext& ctx) {
  RequireFloatOrHalf(ctx, {1});
  const cpu::PoolSpec spec = GradPoolSpec(ctx, cpu::PoolKind::kMax);
  const bool relu = ctx.node.attr_int("relu", 0) != 0;
  KernelInfo info;
  if (ctx.node.attr_int("channels_last", 0) != 0) {  // dY, X, dX [N, spatial..., C]
    if (ctx.in(0).dtype == DataType::kBFloat16) {
      info.heap_bytes = static_cast<size_t>(ctx.in(1).numel()) * sizeof(float);  // the float sums of dX
      info.fn = [spec, relu](const KernelIO& io) {
        cpu::MaxPoolGradLast<bfloat16>(spec, io.In<bfloat16>(0), io.In<bfloat16>(1), io.Out<bfloat16>(0), relu);
      };
    } else if (ctx.in(0).dtype == DataType::kFloat16) {
      info.heap_bytes = static_cast<size_t>(ctx.in(1).numel()) * sizeof(float);
      info.fn = [spec, relu](const KernelIO& io) {
        cpu::MaxPoolGradLast<float16>(spec, io.In<float16>(0), io.In<float16>(1), io.Out<float16>(0), relu);
      };
    } else if (ctx.in(0).dtype == DataType::kFloat64) {
      info.fn = [spec, relu](const KernelIO& io) {
        cpu::MaxPoolGradLast<double>(spec, io.In<double>(0), io.In<double>(1), io.Out<double>(0), relu);
      };
    } else {
      info.fn = [spec, relu](const KernelIO& io) {
        cpu::MaxPoolGradLast<float>(spec, io.In<float>(0), io.In<float>(1), io.Out<float>(0), relu);
      };
    }
    return info;
  }
  if (IsHalf(ctx.in(0).dtype)) {
    const cpu::DnnType t = HalfDnnType(ctx.in(0).dtype);
    const PlaneBlocks pb = PlaneWorkspace(spec, true);
    info.workspace_bytes = pb.workspace_bytes();
    info.fn = [=](const KernelIO& io) {
      RunWidenedPlanes(t, spec, pb, io.in[0], io.in[1], io.out[0], io.workspace,
                       [&](const cpu::PoolSpec& sb, const float* dy, const float* x, float* dx) {
                         cpu::MaxPoolGrad<float>(sb, dy, x, dx, relu);
                       });
    };
  } else if (ctx.in(0).dtype == DataType::kFloat64)
    info.fn = [spec, relu](const KernelIO& io) {
      cpu::MaxPoolGrad<double>(spec, io.In<double>(0), io.In<double>(1), io.Out<double>(0), relu);
    };
  else
    info.fn = [spec, relu](const KernelIO& io) {
      cpu::MaxPoolGrad<float>(spec, io.In<float>(0), io.In<float>(1), io.Out<float>(0), relu);
    };
  return info;
}

// AveragePoolGrad(dY, shape(X)) -> dX (half: as MaxPoolGrad).
KernelInfo AveragePoolGradKernel(const KernelContext& ctx) {
  RequireFloatOrHalf(ctx, {});
  const cpu::PoolSpec spec = GradPoolSpec(ctx, cpu::PoolKind::kAvg);
  KernelInfo info;
  if (ctx.node.attr_int("channels_last", 0) != 0) {  // dY, dX [N, spatial..., C]
    if (IsHalf(ctx.in(0).dtype)) {
      const cpu::DnnType t = HalfDnnType(ctx.in(0).dtype);
      const int64_t ny = ctx.in(0).numel(), nx = ctx.out(0).numel();
      info.workspace_bytes = static_cast<size_t>(WidenedFloats(ny, 0, nx)) * sizeof(float);
      info.fn = [=](const KernelIO& io) {
        RunWidened(t, io.in[0], ny, nullptr, 0, io.out[0], nx, io.workspace,
                   [&](const float* dy, const float*, float* dx) { cpu::AvgPoolGradLast<float>(spec, dy, dx); });
      };
    } else if (ctx.in(0).dtype == DataType::kFloat64) {
      info.fn = [spec](const KernelIO& io) { cpu::AvgPoolGradLast<double>(spec, io.In<double>(0), io.Out<double>(0)); };
    } else {
      info.fn = [spec](const KernelIO& io) { cpu::AvgPoolGradLast<float>(spec, io.In<float>(0), io.Out<float>(0)); };
    }
    return info;
  }
  if (IsHalf(ctx.in(0).dtype)) {
    const cpu::DnnType t = HalfDnnType(ctx.in(0).dtype);
    const PlaneBlocks pb = PlaneWorkspace(spec, false);
    info.workspace_bytes = pb.workspace_bytes();
    info.fn = [=](const KernelIO& io) {
      RunWidenedPlanes(t, spec, pb, io.in[0], nullptr, io.out[0], io.workspace,
                       [&](const cpu::PoolSpec& sb, const float* dy, const float*, float* dx) {
                         cpu::AvgPoolGrad<float>(sb, dy, dx);
                       });
    };
  } else if (ctx.in(0).dtype == DataType::kFloat64)
    info.fn = [spec](const KernelIO& io) { cpu::AvgPoolGrad<double>(spec, io.In<double>(0), io.Out<double>(0)); };
  else
    info.fn = [spec](const KernelIO& io) { cpu::AvgPoolGrad<float>(spec, io.In<float>(0), io.Out<float>(0)); };
  return info;
}

// GatherGrad(dY, indices, shape(X)) {axis} -> dX: scatter-add of dY into zeros of X's shape.
KernelInfo GatherGradKernel(const KernelContext& ctx) {
  RequireFloat(ctx);
  const DataType it = ctx.in(1).dtype;
  if (it != DataType::kInt64 && it != DataType::kInt32) ctx.Unsupported("indices must be int32 or int64");
  const auto& x = ctx.out(0).dims;
  const int rank = static_cast<int>(x.size());
  const int axis = NormalizeAxis(ctx.node.attr_int("axis", 0), rank, ctx.node.Describe());
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x[i];
  for (int i = axis + 1; i < rank; ++i) inner *= x[i];
  const int64_t axis_dim = x[axis], num_idx = ctx.in(1).numel();
  if (ctx.in(0).numel() != outer * num_idx * inner) ctx.Fail("dY's size disagrees with X and the indices");
  const bool f64 = ctx.in(0).dtype == DataType::kFloat64, i64 = it == DataType::kInt64;
  const std::string what = ctx.node.Describe();
  KernelInfo info;
  info.fn = [=](const KernelIO& io) {
    bool ok;
    if (f64)
      ok =
          i64 ? cpu::GatherGrad(io.In<double>(0), io.In<int64_t>(1), num_idx, outer, axis_dim, inner, io.Out<double>(0))
              : cpu::GatherGrad(io.In<double>(0), io.In<int32_t>(1), num_idx, outer, axis_dim, inner,
                                io.Out<double>(0));
    else
      ok = i64 ? cpu::GatherGrad(io.In<float>(0), io.In<int64_t>(1), num_idx, outer, axis_dim, inner, io.Out<float>(0))
               : cpu::GatherGrad(io.In<float>(0), io.In<int32_t>(1), num_idx, outer, axis_dim, inner, io.Out<float>(0));
    if (!ok) throw Error(what + ": index out of range");
  };
  return info;
}

}  // namespace

void RegisterConvGradKernels(KernelRegistry& r) {
  r.Register(
      "ConvGradData", [](const KernelContext& c) { return ConvBackwardKernel(c, cpu::DnnlConvBackward::Kind::kData); },
      kInternalDomain);
  r.Register(
      "ConvGradWeight",
      [](const KernelContext& c) { return ConvBackwardKernel(c, cpu::DnnlConvBackward::Kind::kWeights); },
      kInternalDomain);
  r.Register("MaxPoolGrad", MaxPoolGradKernel, kInternalDomain);
  r.Register("AveragePoolGrad", AveragePoolGradKernel, kInternalDomain);
  r.Register("GatherGrad", GatherGradKernel, kInternalDomain);
}

}  // namespace ot
