// Row kernels on the GPU (cuda_ops/row_kernels.h): LayerNormalization and its gradient, Softmax/LogSoftmax and
// SoftmaxGrad, SoftmaxCrossEntropyLoss and its gradient (LossGrad with softmax = 1), and ReduceToShape over leading
// axes (bias gradients). Each normalizes over a contiguous trailing block of the tensor (rows x cols); other layouts
// are refused by name. Sums are deterministic (fixed trees; column sums in fixed row chunks).
#include <cuda_runtime.h>

#include <limits>
#include <memory>
#include <stdexcept>

#include "cuda_ops/data_kernels.h"
#include "cuda_ops/row_kernels.h"
#include "executor/cuda/cuda_kernels.h"
#include "executor/cuda/device_flag.h"
#include "graph/graph.h"
#include "graph/infer_util.h"

namespace ot {
namespace {

using cuda::FloatType;

// ---- LayerNormalization(X, Scale[, B]) -> Y[, Mean, InvStdDev] ------------------------------------------------------
KernelInfo LayerNormKernel(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const FloatType xt = DeviceFloatType(ctx, ctx.in(0).dtype, "LayerNormalization");
  const FloatType pt = DeviceFloatType(ctx, ctx.in(1).dtype, "LayerNormalization scale");
  if (pt != xt && pt != FloatType::kF32) ctx.Unsupported("a scale that is neither X's dtype nor float32");
  if (ctx.has_input(2) && ctx.in(2).dtype != ctx.in(1).dtype) ctx.Unsupported("B of a dtype other than Scale's");
  if (n.attr_int("stash_type", 1) != 1) ctx.Unsupported("stash_type other than 1 (float32)");
  const auto& dims = ctx.in(0).dims;
  const int axis = NormalizeAxis(n.attr_int("axis", -1), static_cast<int>(dims.size()), n.Describe());
  const int64_t rows = DimsProduct(dims, 0, axis), cols = DimsProduct(dims, axis, dims.size());
  if (ctx.in(1).numel() != cols || (ctx.has_input(2) && ctx.in(2).numel() != cols))
    ctx.Unsupported("Scale/B that broadcast over the normalized axes (the GPU kernel takes them whole)");
  for (int o = 1; o < 3; ++o)
    if (ctx.has_output(o) && ctx.out(o).dtype != DataType::kFloat32) ctx.Unsupported("Mean/InvStdDev not float32");
  const bool has_b = ctx.has_input(2), om = ctx.has_output(1), oi = ctx.has_output(2);
  const double eps = n.attr_float("epsilon", 1e-5f);
  const std::string what = n.Describe();
  KernelInfo info{[=](const KernelIO& io) {
    RunLauncher(what, [&] {
      cuda::LayerNormForward(rows, cols, xt, io.in[0], pt, io.in[1], has_b ? io.in[2] : nullptr, eps, io.out[0],
                             om ? static_cast<float*>(io.out[1]) : nullptr,
                             oi ? static_cast<float*>(io.out[2]) : nullptr, io.stream);
    });
  }};
  AllowInPlace(info, ctx, 0, 0);
  return info;
}

// ---- LayerNormGrad(dY, X, Scale[, Mean, InvStdDev]) -> dX[, dScale, dBias]
// -------------------------------------------
KernelInfo LayerNormGradKernel(const KernelContext& ctx) {
  const Node& n = ctx.node;
  const FloatType xt = DeviceFloatType(ctx, ctx.in(1).dtype, "LayerNormGrad");
  // The residual fold (passes/fuse_residual_norm.h) is a CPU kernel; the Trainer leaves it out on a device.
  if (ctx.has_input(5)) ctx.Unsupported("an addend G (input 5: the CPU residual fold)");
  if (ctx.in(0).dtype != ctx.in(1).dtype || ctx.out(0).dtype != ctx.in(1).dtype)
    ctx.Unsupported("dY/dX of a dtype other than X's");
  const FloatType pt = DeviceFloatType(ctx, ctx.in(2).dtype, "LayerNormGrad scale");
  if (pt != xt && pt != FloatType::kF32) ctx.Unsupported("a scale that is neither X's dtype nor float32");
  for (int o = 1; o < 3; ++o)
    if (ctx.has_output(o) && ctx.out(o).dtype != ctx.in(2).dtype) ctx.Unsupported("dScale/dBias of another dtype");
  const auto& dims = ctx.in(1).dims;
  if (ctx.in(0).dims != dims) ctx.Fail("dY and X shapes differ");
  const int axis = NormalizeAxis(n.attr_int("axis", -1), static_cast<int>(dims.size()), n.Describe());
  const int64_t rows = DimsProduct(dims, 0, axis), cols = DimsProduct(dims, axis, dims.size());
  if (ctx.in(2).numel() != cols) ctx.Unsupported("a Scale that broadcasts over the normalized axes");
  const bool saved = ctx.has_input(3) && ctx.has_input(4);
  if (saved && (ctx.in(3).dtype != DataType::kFloat32 || ctx.in(4).dtype != DataType::kFloat32))
    ctx.Unsupported("Mean/InvStdDev not float32");
  const double eps = n.attr_float("epsilon", 1e-5f);
  const bool o1 = ctx.has_output(1), o2 = ctx.has_output(2);
  const size_t ws = cuda::LayerNormBackwardWorkspaceBytes(rows, cols);
  const std::string what = n.Describe();
  KernelInfo info{[=](const KernelIO& io) {
    RunLauncher(what, [&] {
      cuda::LayerNormBackward(rows, cols, xt, io.in[0], io.in[1], pt, io.in[2],
                              saved ? static_cast<const float*>(io.in[3]) : nullptr,
                              saved ? static_cast<const float*>(io.in[4]) : nullptr, eps, io.out[0],
                              o1 ? io.out[1] : nullptr, o2 ? io.out[2] : nullptr, io.workspace, ws, io.stream);
    });
  }};
  info.workspace_bytes = ws;
  AllowInPlace(info, ctx, 0, 0);
  return info;
}

// Rows x cols of a softmax over `axis` (opset >= 13: one axis, which must be the last; before: the coerced 2-D).
void SoftmaxGeometry(const KernelContext& ctx, const std::vector<int64_t>& dims, int64_t* rows, int64_t* cols) {
  const Node& n = ctx.node;
  // ONNX Softmax before opset 13 coerces to 2-D at `axis` (default 1); SoftmaxGrad says so with legacy = 1.
  const bool onnx_old = n.domain.empty() && n.opset < 13;
  const bool legacy = onnx_old || n.attr_int("legacy", 0) != 0;
  const int rank = static_cast<int>(dims.size());
  const int64_t a = n.attr_int("axis", onnx_old ? 1 : -1);
  const int axis = legacy && a == rank ? rank : NormalizeAxis(a, rank, n.Describe());
  if (!legacy && axis != rank - 1) ctx.Unsupported("a softmax over an axis other than the last on the GPU");
  *rows = DimsProduct(dims, 0, axis);
  *cols = DimsProduct(dims, axis, dims.size());
}

KernelInfo SoftmaxKernel(const KernelContext& ctx) {
  const FloatType t = DeviceFloatType(ctx, ctx.in(0).dtype, ctx.node.op_type.c_str());
  if (ctx.node.op_type == "Hardmax") ctx.Unsupported("Hardmax on the GPU");
  int64_t rows, cols;
  SoftmaxGeometry(ctx, ctx.in(0).dims, &rows, &cols);
  const bool log = ctx.node.op_type == "LogSoftmax";
  const std::string what = ctx.node.Describe();
  KernelInfo info{[=](const KernelIO& io) {
    RunLauncher(what, [&] { cuda::SoftmaxForward(log, rows, cols, t, io.in[0], io.out[0], io.stream); });
  }};
  AllowInPlace(info, ctx, 0, 0);
  return info;
}

// SoftmaxGrad(dY, Y) {axis, log, legacy} -> dX
KernelInfo SoftmaxGradKernel(const KernelContext& ctx) {
  const FloatType t = DeviceFloatType(ctx, ctx.in(1).dtype, "SoftmaxGrad");
  if (ctx.in(0).dtype != ctx.in(1).dtype || ctx.out(0).dtype != ctx.in(1).dtype)
    ctx.Unsupported("dY/dX of a dtype other than Y's");
  if (ctx.in(0).dims != ctx.in(1).dims) ctx.Fail("dY and Y shapes differ");
  int64_t rows, cols;
  SoftmaxGeometry(ctx, ctx.in(1).dims, &rows, &cols);
  const bool log = ctx.node.attr_int("log", 0) != 0;
  const std::string what = ctx.node.Describe();
  KernelInfo info{[=](const KernelIO& io) {
    RunLauncher(what, [&] { cuda::SoftmaxBackward(log, rows, cols, t, io.in[0], io.in[1], io.out[0], io.stream); });
  }};
  AllowInPlace(info, ctx, 0, 0);
  AllowInPlace(info, ctx, 0, 1);
  return info;
}

// Scores [N, C, d1...] with D = d1 x ... > 1 are transposed to [N, D, C] rows in the workspace first (and a
// [N, C, D] output back from rows there): the row kernels take [rows, C].
struct LossShape {
  int64_t n = 0, c = 0, d = 1;  // the kernels see n * d rows
  size_t esz = 4;
  size_t row_bytes() const { return static_cast<size_t>(n * c * d) * esz; }
  size_t rows_ws() const { return d > 1 ? (row_bytes() + 255) / 256 * 256 : 0; }
  cuda::LossReduction red = cuda::LossReduction::kMean;
  int64_t ignore = std::numeric_limits<int64_t>::min();
  cuda::IndexType it = cuda::IndexType::kI64;
};

LossShape LossGeometry(const KernelContext& ctx, int x, int labels) {
  const Node& n = ctx.node;
  const auto& d = ctx.in(x).dims;
  if (d.size() < 2) ctx.Fail("scores must have rank >= 2 (N, C, ...)");
  LossShape s;
  s.n = d[0];
  s.c = d[1];
  s.d = DimsProduct(d, 2, d.size());
  s.esz = SizeOf(ctx.in(x).dtype);
  if (ctx.in(labels).numel() != s.n * s.d) ctx.Fail("labels do not match the scores' shape");
  const DataType lt = ctx.in(labels).dtype;
  if (lt != DataType::kInt32 && lt != DataType::kInt64) ctx.Unsupported("labels of " + DataTypeName(lt));
  s.it = lt == DataType::kInt32 ? cuda::IndexType::kI32 : cuda::IndexType::kI64;
  const std::string rs = n.attr_string("reduction", "mean");
  if (rs == "none")
    s.red = cuda::LossReduction::kNone;
  else if (rs == "sum")
    s.red = cuda::LossReduction::kSum;
  else if (rs == "mean")
    s.red = cuda::LossReduction::kMean;
  else
    ctx.Fail("unknown reduction '" + rs + "'");
  if (n.has_attr("ignore_index")) s.ignore = n.attr_int("ignore_index", 0);
  return s;
}

// A loss kernel that raises `flag` for a bad label: the launch, then the flag's copy to the host, read by the
// KernelInfo's after_run (CheckedLossInfo).
KernelInfo CheckedLossInfo(std::string what, std::shared_ptr<DeviceFlag> flag,
                           std::function<void(const KernelIO&, int*)> run) {
  KernelInfo info{[flag, run](const KernelIO& io) {
    run(io, flag->dev);
    flag->CopyBack(io.stream);
  }};
  info.after_run = FlagCheck(flag, what + ": a label is outside [0, C) and is not ignore_index");
  return info;
}

// SoftmaxCrossEntropyLoss(scores, labels[, weights]) -> loss[, log_prob]
KernelInfo SceLossKernel(const KernelContext& ctx) {
  if (ctx.node.op_type != "SoftmaxCrossEntropyLoss") ctx.Unsupported(ctx.node.op_type + " on the GPU");
  const FloatType t = DeviceFloatType(ctx, ctx.in(0).dtype, "SoftmaxCrossEntropyLoss");
  if (ctx.has_input(2) && ctx.in(2).dtype != ctx.in(0).dtype) ctx.Unsupported("weights of another dtype");
  if (ctx.out(0).dtype != ctx.in(0).dtype) ctx.Unsupported("a loss of another dtype than the scores");
  const LossShape s = LossGeometry(ctx, 0, 1);
  const bool has_w = ctx.has_input(2), has_lp = ctx.has_output(1);
  const size_t ws = cuda::SoftmaxCrossEntropyWorkspaceBytes(s.n * s.d), rws = s.rows_ws();
  auto flag = std::make_shared<DeviceFlag>();
  KernelInfo info = CheckedLossInfo(ctx.node.Describe(), flag, [=](const KernelIO& io, int* bad) {
    RunLauncher("", [&] {
      uint8_t* w = static_cast<uint8_t*>(io.workspace);
      const void* rows = io.in[0];
      void* lp = has_lp ? io.out[1] : nullptr;
      if (s.d > 1) {  // [N, C, D] -> [N, D, C]; log_prob made as rows, then back
        cuda::Transpose(io.in[0], w, s.esz, {s.n, s.c, s.d}, {0, 2, 1}, io.stream);
        rows = w;
        if (lp) lp = w + rws;
      }
      cuda::SoftmaxCrossEntropyForward(s.red, s.n * s.d, s.c, t, rows, s.it, io.in[1], has_w ? io.in[2] : nullptr,
                                       s.ignore, io.out[0], lp, bad, w + 2 * rws, ws, io.stream);
      if (s.d > 1 && lp) cuda::Transpose(lp, io.out[1], s.esz, {s.n, s.d, s.c}, {0, 2, 1}, io.stream);
    });
  });
  info.workspace_bytes = ws + 2 * rws;
  return info;
}

// LossGrad(dLoss, scores, labels[, weights]) {softmax = 1} -> dScores
KernelInfo LossGradKernel(const KernelContext& ctx) {
  if (ctx.node.attr_int("softmax", 0) == 0) ctx.Unsupported("the NegativeLogLikelihoodLoss gradient on the GPU");
  const FloatType t = DeviceFloatType(ctx, ctx.in(1).dtype, "LossGrad");
  if (ctx.in(0).dtype != ctx.in(1).dtype || (ctx.has_input(3) && ctx.in(3).dtype != ctx.in(1).dtype))
    ctx.Unsupported("dLoss/weights of a dtype other than the scores'");
  // dScores in half from float32 scores (attribute `to`, passes/half_loss_grad.h): the float gradient in the
  // workspace, then one Cast.
  const bool narrow = ctx.out(0).dtype != ctx.in(1).dtype;
  if (narrow && (ctx.in(1).dtype != DataType::kFloat32 ||
                 (ctx.out(0).dtype != DataType::kFloat16 && ctx.out(0).dtype != DataType::kBFloat16)))
    ctx.Unsupported("dScores of a dtype other than the scores' (only float32 scores to a half gradient)");
  const FloatType to = narrow ? DeviceFloatType(ctx, ctx.out(0).dtype, "LossGrad") : t;
  const LossShape s = LossGeometry(ctx, 1, 2);
  const bool has_w = ctx.has_input(3);
  const size_t ws = cuda::SoftmaxCrossEntropyWorkspaceBytes(s.n * s.d), rws = s.rows_ws();
  const int64_t elems = s.n * s.c * s.d;
  const size_t wide = narrow ? (static_cast<size_t>(elems) * sizeof(float) + 255) / 256 * 256 : 0;
  const size_t ws_aligned = (ws + 255) / 256 * 256;
  auto flag = std::make_shared<DeviceFlag>();
  KernelInfo info = CheckedLossInfo(ctx.node.Describe(), flag, [=](const KernelIO& io, int* bad) {
    RunLauncher("", [&] {
      uint8_t* w = static_cast<uint8_t*>(io.workspace);
      void* out = narrow ? static_cast<void*>(w + 2 * rws + ws_aligned) : io.out[0];
      const void* rows = io.in[1];
      void* drows = out;
      if (s.d > 1) {  // [N, C, D] -> [N, D, C]; the gradient made as rows, then back
        cuda::Transpose(io.in[1], w, s.esz, {s.n, s.c, s.d}, {0, 2, 1}, io.stream);
        rows = w;
        drows = w + rws;
      }
      cuda::SoftmaxCrossEntropyBackward(s.red, s.n * s.d, s.c, t, io.in[0], rows, s.it, io.in[2],
                                        has_w ? io.in[3] : nullptr, s.ignore, drows, bad, w + 2 * rws, ws, io.stream);
      if (s.d > 1) cuda::Transpose(drows, out, s.esz, {s.n, s.d, s.c}, {0, 2, 1}, io.stream);
      if (narrow) cuda::Cast(t, out, to, io.out[0], elems, io.stream);
    });
  });
  info.workspace_bytes = (narrow ? ws_aligned : ws) + 2 * rws + wide;
  return info;
}

// ReduceToShape(X, shape) -> Y: a sum over the leading axes (the trailing ones kept), or a copy when nothing is
// reduced.
KernelInfo ReduceToShapeKernel(const KernelContext& ctx) {
  const std::vector<int64_t> in = ctx.in(0).dims, out = ctx.out(0).dims;
  const FloatType xt = DeviceFloatType(ctx, ctx.in(0).dtype, "ReduceToShape");
  const FloatType yt = DeviceFloatType(ctx, ctx.out(0).dtype, "ReduceToShape");
  const int64_t n = NumElements(in), m = NumElements(out);
  if (n == m) {
    if (xt != yt) ctx.Unsupported("a ReduceToShape that changes the dtype");
    return DeviceCopyKernel(ctx);  // nothing reduced: the input's bytes
  }
  std::vector<int64_t> core(out.begin(), out.end());
  while (!core.empty() && core.front() == 1) core.erase(core.begin());
  const bool rows_case = m > 0 && in.size() >= core.size() &&
                         std::equal(core.begin(), core.end(), in.end() - static_cast<std::ptrdiff_t>(core.size()));
  if (!rows_case)
    ctx.Unsupported("ReduceToShape " + DimsToString(in) + " -> " + DimsToString(out) +
                    " on the GPU (sums over leading axes are supported)");
  const int64_t rows = m > 0 ? n / m : 0, cols = m;
  const size_t ws = cuda::ReduceRowsToColumnsWorkspaceBytes(rows, cols);
  const std::string what = ctx.node.Describe();
  KernelInfo info{[=](const KernelIO& io) {
    RunLauncher(
        what, [&] { cuda::ReduceRowsToColumns(rows, cols, xt, io.in[0], yt, io.out[0], io.workspace, ws, io.stream); });
  }};
  info.workspace_bytes = ws;
  return info;
}

}  // namespace

void RegisterCudaRowKernels(KernelRegistry& r) {
  r.Register("LayerNormalization", LayerNormKernel);
  r.Register("LayerNormalization", LayerNormKernel, kInternalDomain);
  r.Register("LayerNormGrad", LayerNormGradKernel, kInternalDomain);
  r.Register("Softmax", SoftmaxKernel);
  r.Register("LogSoftmax", SoftmaxKernel);
  r.Register("SoftmaxGrad", SoftmaxGradKernel, kInternalDomain);
  r.Register("SoftmaxCrossEntropyLoss", SceLossKernel);
  r.Register("LossGrad", LossGradKernel, kInternalDomain);
  r.Register("ReduceToShape", ReduceToShapeKernel, kInternalDomain);
}

}  // namespace ot
