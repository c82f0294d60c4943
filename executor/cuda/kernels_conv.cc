// Convolution on the GPU through cuDNN (cuda_ops/cudnn_conv.h): Conv (with its bias), ai.onnxtrain.ConvGradData and
// ConvGradWeight, ConvTranspose (cuda_ops/cudnn_conv_transpose.h: the adjoint convolution's backward-data; its
// gradient rule, graph/grad/conv_transpose_grad.cc, emits Conv, ConvGradWeight and ReduceSum, all here); and
// ReduceSum over all axes but a contiguous block (Conv's bias gradient, a ReduceSum of dY over N and the spatial axes)
// where the generated kernels, which reduce trailing axes only, do not lower it. The
// geometry comes from the CPU kernels' own readers of the attributes (BuildConvSpec, linalg::ConvAxis), so both
// backends agree on it; a geometry cuDNN's legacy API cannot express (asymmetric padding that changes the output
// size, 4-D and up) is refused with UnsupportedError naming the node and the reason. fp32 runs exact fp32 unless
// --tf32; --deterministic picks deterministic algorithms. Each kernel's cuDNN algorithm is chosen when the plan is
// made (its workspace is planned in the arena).
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "cpu_ops/conv.h"
#include "cuda_ops/cudnn_conv.h"
#include "cuda_ops/cudnn_conv_transpose.h"
#include "cuda_ops/data_kernels.h"
#include "cuda_ops/row_kernels.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/device.h"
#include "executor/kernels/conv_geometry.h"
#include "graph/graph.h"
#include "graph/infer_util.h"
#include "graph/ops/linalg_util.h"
#include "graph/tensor.h"

namespace ot {

namespace {

// The geometry of a spec and the device's --tf32 / --deterministic into a ConvDesc or a ConvTransposeDesc (the same
// fields; d.type set first).
template <typename Desc>
void FillConvDesc(const KernelContext& ctx, const cpu::ConvSpec& s, Desc& d) {
  d.n = s.n;
  d.c_in = s.c_in;
  d.c_out = s.c_out;
  d.group = s.group;
  d.in_spatial = s.in_spatial;
  d.out_spatial = s.out_spatial;
  d.kernel = s.kernel;
  d.strides = s.strides;
  d.dilations = s.dilations;
  d.pad_begin = s.pad_begin;
  d.pad_end = s.pad_end;
  if (ctx.device) {
    d.tf32 = d.type == cuda::FloatType::kF32 && ctx.device->options().tf32;
    d.deterministic = ctx.device->options().deterministic;
  }
}

// The cuDNN desc of a spec; refuses (UnsupportedError) what cuDNN cannot run, naming the reason.
cuda::ConvDesc DescOf(const KernelContext& ctx, const cpu::ConvSpec& s, DataType t) {
  cuda::ConvDesc d;
  d.type = DeviceFloatType(ctx, t, "convolution");
  FillConvDesc(ctx, s, d);
  try {
    cuda::ValidateConv(d);
  } catch (const std::invalid_argument& e) {
    ctx.Unsupported(std::string("a convolution cuDNN cannot describe: ") + e.what());
  }
  const std::string why = cuda::ConvUnsupportedReason(d);
  if (!why.empty()) ctx.Unsupported(why + " on the GPU (run it with --device cpu)");
  return d;
}

// The workspace of the algorithm cuDNN's heuristics pick for (d, pass), chosen now so the plan can place it. No
// algorithm (or a cuDNN failure) is an UnsupportedError naming the node.
size_t WorkspaceOf(const KernelContext& ctx, const cuda::ConvDesc& d, cuda::ConvPass pass) {
  try {
    return cuda::ConvWorkspaceBytes(d, pass);
  } catch (const std::exception& e) {
    ctx.Unsupported(e.what());
  }
}

double ConvFlops(const cuda::ConvDesc& d) {
  double f = 2.0 * static_cast<double>(d.n) * static_cast<double>(d.c_out) * static_cast<double>(d.c_in / d.group);
  for (int64_t v : d.out_spatial) f *= static_cast<double>(v);
  for (int64_t v : d.kernel) f *= static_cast<double>(v);
  return f;
}

bool HasZero(const std::vector<int64_t>& v) {
  return std::any_of(v.begin(), v.end(), [](int64_t d) { return d == 0; });
}

// Output 0 zero-filled (a gradient of an empty batch) or left alone when it is empty.
KernelInfo ZeroKernel(const KernelContext& ctx) {
  const size_t bytes = ctx.out(0).nbytes();
  return MakeInfo([bytes](const KernelIO& io) {
    if (bytes) CudaCheck(cudaMemsetAsync(io.out[0], 0, bytes, static_cast<cudaStream_t>(io.stream)), "zero fill");
  });
}

// ---- Conv(X, W[, B]) -> Y
// ---------------------------------------------------------------------------------------------
KernelInfo ConvKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (ctx.in(1).dtype != t || (ctx.has_input(2) && ctx.in(2).dtype != t)) ctx.Fail("X, W and B must share a dtype");
  const cpu::ConvSpec s = BuildConvSpec(ctx, 0, 1, 2);
  if (s.channels_last) ctx.Unsupported("a channels-last convolution on the GPU (the channels_last pass is the CPU's)");
  if (ctx.out(0).numel() == 0) return MakeInfo([](const KernelIO&) {});
  if (s.in_spatial.size() > 3) ctx.Unsupported(std::to_string(s.in_spatial.size()) + "-D convolution on the GPU");
  const cuda::ConvDesc d = DescOf(ctx, s, t);
  const size_t ws = WorkspaceOf(ctx, d, cuda::ConvPass::kForward);
  const bool has_b = ctx.has_input(2);
  const std::string what = ctx.node.Describe();
  KernelInfo info = MakeInfo([=](const KernelIO& io) {
    RunLauncher(what, [&] {
      cuda::ConvForward(d, io.in[0], io.in[1], has_b ? io.in[2] : nullptr, io.out[0], io.workspace, ws, io.stream);
    });
  });
  info.workspace_bytes = ws;
  info.flops = ConvFlops(d);
  return info;
}

// ---- ConvGradData(dY, W, shape(X)) -> dX and ConvGradWeight(dY, X, shape(W)) -> dW
// -----------------------------------
KernelInfo ConvGradKernel(const KernelContext& ctx, bool data) {
  const DataType t = ctx.in(0).dtype;
  if (ctx.in(1).dtype != t || ctx.out(0).dtype != t) ctx.Fail("dY, input 1 and the output must share a dtype");
  const cpu::ConvSpec s = data ? GradConvSpec(ctx, ctx.out(0).dims, ctx.in(1).dims, ctx.in(0).dims)
                               : GradConvSpec(ctx, ctx.in(1).dims, ctx.out(0).dims, ctx.in(0).dims);
  if (s.channels_last) ctx.Unsupported("a channels-last convolution on the GPU (the channels_last pass is the CPU's)");
  if (ctx.out(0).numel() == 0) return MakeInfo([](const KernelIO&) {});
  // An empty batch (or an empty output plane): dW sums nothing, zeros; dX is empty then too, or all padding.
  if (s.n == 0 || HasZero(s.out_spatial) || HasZero(s.in_spatial)) return ZeroKernel(ctx);
  if (s.in_spatial.size() > 3) ctx.Unsupported(std::to_string(s.in_spatial.size()) + "-D convolution on the GPU");
  const cuda::ConvDesc d = DescOf(ctx, s, t);
  const cuda::ConvPass pass = data ? cuda::ConvPass::kBackwardData : cuda::ConvPass::kBackwardFilter;
  const size_t ws = WorkspaceOf(ctx, d, pass);
  const std::string what = ctx.node.Describe();
  KernelInfo info = MakeInfo([=](const KernelIO& io) {
    RunLauncher(what, [&] {
      if (data)
        cuda::ConvBackwardData(d, io.in[0], io.in[1], io.out[0], io.workspace, ws, io.stream);
      else
        cuda::ConvBackwardFilter(d, io.in[0], io.in[1], io.out[0], io.workspace, ws, io.stream);
    });
  });
  info.workspace_bytes = ws;
  info.flops = ConvFlops(d);
  return info;
}

// ---- ConvTranspose(X, W[, B]) -> Y
// ------------------------------------------------------------------------------------ The geometry is BuildConvSpec's
// (the CPU kernel's reader: auto_pad, output_padding and output_shape folded into pad_begin / pad_end by
// linalg::ConvTransposeAxis, pad_end negative where output rows lie past every input's reach).
KernelInfo ConvTransposeKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  if (ctx.in(1).dtype != t || (ctx.has_input(2) && ctx.in(2).dtype != t)) ctx.Fail("X, W and B must share a dtype");
  const cpu::ConvSpec s = BuildConvSpec(ctx, 0, 1, 2);
  if (ctx.in(1).dims[1] * s.group != s.c_out) ctx.Fail("W's output channels times group differ from Y's channels");
  if (ctx.out(0).numel() == 0) return MakeInfo([](const KernelIO&) {});
  if (ctx.in(0).numel() == 0) ctx.Unsupported("a transposed convolution of an empty input on the GPU");
  cuda::ConvTransposeDesc d;
  d.type = DeviceFloatType(ctx, t, "transposed convolution");
  FillConvDesc(ctx, s, d);
  try {
    cuda::ValidateConvTranspose(d);
  } catch (const std::invalid_argument& e) {
    ctx.Unsupported(std::string("a transposed convolution cuDNN cannot describe: ") + e.what());
  }
  const std::string why = cuda::ConvTransposeUnsupportedReason(d);
  if (!why.empty()) ctx.Unsupported(why + " on the GPU (run it with --device cpu)");
  size_t ws = 0;
  try {
    ws = cuda::ConvTransposeWorkspaceBytes(d);
  } catch (const std::exception& e) {
    ctx.Unsupported(e.what());
  }
  const bool has_b = ctx.has_input(2);
  const std::string what = ctx.node.Describe();
  KernelInfo info = MakeInfo([=](const KernelIO& io) {
    RunLauncher(what, [&] {
      cuda::ConvTransposeForward(d, io.in[0], io.in[1], has_b ? io.in[2] : nullptr, io.out[0], io.workspace, ws,
                                 io.stream);
    });
  });
  info.workspace_bytes = ws;
  info.flops = ConvFlops(cuda::LowerConvTranspose(d).conv);  // the adjoint convolution's multiply-adds
  return info;
}

// ---- ReduceSum
// -------------------------------------------------------------------------------------------------------- What the
// fusion table lowers (reductions over trailing axes, elementwise epilogues) runs as a generated kernel, as before this
// factory existed. Otherwise a sum that keeps one contiguous block of axes [k0, k1) -- X viewed as [P, K, Q], Y = [K]
// -- runs as rows: [P, K, Q] transposed to [P, Q, K] in the workspace (when Q > 1), then the deterministic column sum
// over the P Q rows (cuda::ReduceRowsToColumns: double, fixed chunks, rounded once). Conv's bias gradient, ReduceSum(dY
// [N, C, H, W], axes {0, 2, 3}), is this with P = N, K = C, Q = H W.
KernelInfo ReduceSumKernel(const KernelContext& ctx) {
  if (std::optional<KernelInfo> g = GeneratedKernel(ctx)) return std::move(*g);
  const Node& n = ctx.node;
  const std::vector<int64_t> dims = ctx.in(0).dims;
  const int rank = static_cast<int>(dims.size());
  std::vector<int64_t> axes;
  if (n.opset >= 13) {
    if (ctx.has_input(1)) {
      if (!ctx.input_values[1]) ctx.Fail("axes must be known when the plan is made");
      axes = ctx.input_values[1]->ToInt64Vector();
    }
  } else {
    axes = n.attr_ints("axes");
  }
  if (axes.empty() && n.attr_int("noop_with_empty_axes", 0) != 0) return DeviceCopyKernel(ctx);
  std::vector<bool> red(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) red[static_cast<size_t>(NormalizeAxis(a, rank, n.Describe()))] = true;
  int k0 = 0;
  while (k0 < rank && red[static_cast<size_t>(k0)]) ++k0;
  int k1 = k0;
  while (k1 < rank && !red[static_cast<size_t>(k1)]) ++k1;
  for (int i = k1; i < rank; ++i)
    if (!red[static_cast<size_t>(i)])
      ctx.Unsupported("ReduceSum of " + DimsToString(dims) + " keeping axes that are not contiguous on the GPU");
  const cuda::FloatType xt = DeviceFloatType(ctx, ctx.in(0).dtype, "ReduceSum");
  const cuda::FloatType yt = DeviceFloatType(ctx, ctx.out(0).dtype, "ReduceSum");
  const int64_t P = DimsProduct(dims, 0, static_cast<size_t>(k0)),
                K = DimsProduct(dims, static_cast<size_t>(k0), static_cast<size_t>(k1)),
                Q = DimsProduct(dims, static_cast<size_t>(k1), dims.size());
  if (ctx.out(0).numel() != K) ctx.Fail("the output does not have the kept axes' size");
  if (K == 0) return MakeInfo([](const KernelIO&) {});
  const size_t esz = SizeOf(ctx.in(0).dtype);
  const int64_t rows = P * Q;
  const size_t tbytes = Q > 1 && rows > 0 ? (static_cast<size_t>(rows * K) * esz + 255) / 256 * 256 : 0;
  const size_t rws = cuda::ReduceRowsToColumnsWorkspaceBytes(rows, K);
  const std::string what = n.Describe();
  KernelInfo info = MakeInfo([=](const KernelIO& io) {
    RunLauncher(what, [&] {
      uint8_t* w = static_cast<uint8_t*>(io.workspace);
      const void* src = io.in[0];
      if (tbytes) {
        cuda::Transpose(io.in[0], w, esz, {P, K, Q}, {0, 2, 1}, io.stream);
        src = w;
      }
      cuda::ReduceRowsToColumns(rows, K, xt, src, yt, io.out[0], w + tbytes, rws, io.stream);
    });
  });
  info.workspace_bytes = tbytes + rws;
  return info;
}

}  // namespace

void RegisterCudaConvKernels(KernelRegistry& r) {
  r.Register("Conv", ConvKernel);
  r.Register(
      "ConvGradData", [](const KernelContext& c) { return ConvGradKernel(c, true); }, kInternalDomain);
  r.Register(
      "ConvGradWeight", [](const KernelContext& c) { return ConvGradKernel(c, false); }, kInternalDomain);
  r.Register("ConvTranspose", ConvTransposeKernel);
  r.Register("ReduceSum", ReduceSumKernel);
}

}  // namespace ot
