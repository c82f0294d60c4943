// CPU kernel factories of the shape family, part 1: copies and rearrangements (Reshape, Flatten, Squeeze,
// Unsqueeze, Transpose, Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth). Everything moves
// elements as opaque bytes, so every storable dtype is handled. Part 2 is shape_index.cc.
#include <algorithm>
#include <cstring>

#include "cpu_ops/concat.h"
#include "cpu_ops/pad.h"
#include "cpu_ops/slice.h"
#include "cpu_ops/tile.h"
#include "cpu_ops/transpose.h"
#include "executor/kernel_registry.h"
#include "executor/kernels/shape_internal.h"
#include "graph/graph.h"
#include "graph/infer_util.h"

namespace ot {
namespace {
using namespace shape_kernels;

// Reshape-like ops: the output holds the input's bytes. The memory plan gives the output the input's memory (the
// same dtype and element count) where the input dies here (KernelInfo::inplace) or as a view where it stays live
// (KernelInfo::views), and then nothing is copied.
KernelInfo CopyKernel(const KernelContext& ctx) {
  ElemSize(ctx, ctx.in(0).dtype);
  const size_t n = ctx.out(0).nbytes();
  if (n != ctx.in(0).nbytes()) ctx.Fail("output size differs from input size");
  KernelInfo info{[n](const KernelIO& io) {
    if (io.out[0] != io.in[0]) cpu::CopyBytes(io.out[0], io.in[0], n);
  }};
  if (ctx.in(0).dtype == ctx.out(0).dtype) {
    info.inplace.push_back({0, 0});
    info.views.push_back({0, 0});
  }
  return info;
}

KernelInfo TransposeKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  const std::vector<int64_t> dims = ctx.in(0).dims;
  std::vector<int64_t> perm = ctx.node.attr_ints("perm");
  const int r = static_cast<int>(dims.size());
  if (perm.empty())
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  for (int64_t& p : perm) p = NormalizeAxis(p, r, ctx.node.Describe());
  return {[=](const KernelIO& io) { cpu::Transpose(io.in[0], io.out[0], esz, dims, perm); }};
}

KernelInfo ConcatKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.out(0).dtype);
  const std::vector<int64_t>& od = ctx.out(0).dims;
  const int r = static_cast<int>(od.size());
  const int axis = NormalizeAxis(ctx.node.attr_int("axis", 1), r, ctx.node.Describe());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= od[d];
  for (int d = axis + 1; d < r; ++d) inner *= od[d];
  const int n = static_cast<int>(ctx.inputs.size());
  std::vector<int64_t> row_bytes;
  for (int i = 0; i < n; ++i) row_bytes.push_back(ctx.in(i).dims[axis] * inner * static_cast<int64_t>(esz));
  return {[=](const KernelIO& io) {
    std::vector<const void*> ins(io.in, io.in + n);
    cpu::Concat(ins, row_bytes, io.out[0], outer);
  }};
}

KernelInfo SplitKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  const std::vector<int64_t>& id = ctx.in(0).dims;
  const int r = static_cast<int>(id.size());
  const int axis = NormalizeAxis(ctx.node.attr_int("axis", 0), r, ctx.node.Describe());
  const int n = static_cast<int>(ctx.outputs.size());
  std::optional<std::vector<int64_t>> sizes = shape_ops::ReadSplitSizes(ctx.node, KernelValues(ctx), id[axis], n);
  if (!sizes) ctx.Fail("split sizes are unknown");
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= id[d];
  for (int d = axis + 1; d < r; ++d) inner *= id[d];
  std::vector<int64_t> row_bytes;
  std::vector<bool> present;
  for (int i = 0; i < n; ++i) {
    row_bytes.push_back((*sizes)[i] * inner * static_cast<int64_t>(esz));
    present.push_back(ctx.has_output(i));
  }
  return {[=](const KernelIO& io) {
    std::vector<void*> outs(n);
    for (int i = 0; i < n; ++i) outs[i] = present[i] ? io.out[i] : nullptr;
    cpu::Split(io.in[0], outs, row_bytes, outer);
  }};
}

KernelInfo SliceKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  const std::vector<int64_t> id = ctx.in(0).dims;
  const std::vector<int64_t> od = ctx.out(0).dims;
  const int r = static_cast<int>(id.size());
  std::optional<shape_ops::SliceArgs> a = shape_ops::ReadSliceArgs(ctx.node, KernelValues(ctx), r);
  if (!a) ctx.Fail("slice arguments are unknown");
  std::vector<int64_t> starts(r, 0), steps(r, 1);
  for (size_t i = 0; i < a->axes.size(); ++i) {
    const int ax = static_cast<int>(a->axes[i]);
    shape_ops::SliceAxis s = shape_ops::NormalizeSlice(id[ax], a->starts[i], a->ends[i], a->steps[i]);
    if (s.count != od[ax]) ctx.Fail("slice length disagrees with the inferred output shape");
    starts[ax] = s.start;
    steps[ax] = s.step;
  }
  return {[=](const KernelIO& io) { cpu::Slice(io.in[0], io.out[0], esz, id, starts, steps, od); }};
}

// SliceGrad(dY, shape(X), starts, ends[, axes[, steps]]) -> dX: zeros, with dY where the forward Slice took it.
KernelInfo SliceGradKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  const std::vector<int64_t> yd = ctx.in(0).dims, xd = ctx.out(0).dims;
  const int r = static_cast<int>(xd.size());
  if (static_cast<int>(yd.size()) != r) ctx.Fail("dY's rank differs from X's");
  std::optional<shape_ops::SliceArgs> a = shape_ops::ReadSliceInputs(ctx.node, KernelValues(ctx), r, 2);
  if (!a) ctx.Fail("slice arguments are unknown");
  std::vector<int64_t> starts(r, 0), steps(r, 1);
  for (int k = 0; k < r; ++k)
    if (yd[k] != xd[k] && std::find(a->axes.begin(), a->axes.end(), k) == a->axes.end())
      ctx.Fail("dY and X differ along axis " + std::to_string(k) + ", which the slice does not take from");
  for (size_t i = 0; i < a->axes.size(); ++i) {
    const int ax = static_cast<int>(a->axes[i]);
    shape_ops::SliceAxis s = shape_ops::NormalizeSlice(xd[ax], a->starts[i], a->ends[i], a->steps[i]);
    if (s.count != yd[ax]) ctx.Fail("dY's length along axis " + std::to_string(ax) + " disagrees with the slice");
    starts[ax] = s.start;
    steps[ax] = s.step;
  }
  return {[=](const KernelIO& io) { cpu::SliceBackward(io.in[0], io.out[0], esz, yd, starts, steps, xd); }};
}

KernelInfo ExpandKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  const std::vector<int64_t> id = ctx.in(0).dims, od = ctx.out(0).dims;
  return {[=](const KernelIO& io) { cpu::Expand(io.in[0], id, io.out[0], od, esz); }};
}

KernelInfo TileKernel(const KernelContext& ctx) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  const std::vector<int64_t> id = ctx.in(0).dims;
  const Tensor* rv = KernelValues(ctx)(1);
  if (!rv) ctx.Fail("repeats are unknown");
  const std::vector<int64_t> reps = rv->ToInt64Vector();
  if (reps.size() != id.size()) ctx.Fail("repeats length differs from the input rank");
  return {[=](const KernelIO& io) { cpu::Tile(io.in[0], id, reps, io.out[0], esz); }};
}

KernelInfo PadKernel(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype;
  const size_t esz = ElemSize(ctx, t);
  const std::vector<int64_t> id = ctx.in(0).dims, od = ctx.out(0).dims;
  std::optional<shape_ops::PadArgs> p =
      shape_ops::ReadPadArgs(ctx.node, KernelValues(ctx), static_cast<int>(id.size()));
  if (!p) ctx.Fail("pads are unknown");
  cpu::PadMode mode;
  if (p->mode == "constant")
    mode = cpu::PadMode::kConstant;
  else if (p->mode == "reflect")
    mode = cpu::PadMode::kReflect;
  else if (p->mode == "edge")
    mode = cpu::PadMode::kEdge;
  else if (p->mode == "wrap" && ctx.node.opset >= 19)
    mode = cpu::PadMode::kWrap;
  else
    ctx.Unsupported("mode '" + p->mode + "' is not supported");
  for (size_t d = 0; d < id.size(); ++d)
    if (mode != cpu::PadMode::kConstant && id[d] == 0 && od[d] > 0)
      ctx.Fail("cannot pad an empty dim in mode " + p->mode);
  // The pad value: attribute `value` before opset 11, optional input 2 (read at run time) from it, else 0.
  std::vector<uint8_t> value(esz, 0);
  if (ctx.node.opset < 11) {
    Tensor v = Tensor::Scalar(ctx.node.attr_float("value", 0.f)).CastTo(t);
    std::memcpy(value.data(), v.raw(), esz);
  }
  const bool value_input = ctx.node.opset >= 11 && ctx.has_input(2);
  if (value_input && ctx.in(2).numel() != 1) ctx.Fail("constant_value must hold one element");
  const std::vector<int64_t> begin = p->begin;
  return {[=](const KernelIO& io) {
    const void* v = value_input ? io.in[2] : value.data();
    cpu::Pad(io.in[0], id, io.out[0], od, begin, mode, v, esz);
  }};
}

// DepthToSpace / SpaceToDepth as a transpose of a 6-d view.
KernelInfo SpaceDepthKernel(const KernelContext& ctx, bool to_space) {
  const size_t esz = ElemSize(ctx, ctx.in(0).dtype);
  const std::vector<int64_t>& id = ctx.in(0).dims;
  const int64_t b = ctx.node.attr_int("blocksize", 0);
  const int64_t n = id[0], c = id[1], h = id[2], w = id[3];
  std::vector<int64_t> view, perm;
  if (to_space) {
    const int64_t c2 = c / (b * b);
    if (ctx.node.attr_string("mode", "DCR") == "DCR") {
      view = {n, b, b, c2, h, w};
      perm = {0, 3, 4, 1, 5, 2};
    } else {
      view = {n, c2, b, b, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    }
  } else {
    view = {n, c, h / b, b, w / b, b};
    perm = {0, 3, 5, 1, 2, 4};
  }
  return {[=](const KernelIO& io) { cpu::Transpose(io.in[0], io.out[0], esz, view, perm); }};
}

}  // namespace

void RegisterShapeKernels(KernelRegistry& r) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) r.Register(op, CopyKernel);
  r.Register("Transpose", TransposeKernel);
  r.Register("Concat", ConcatKernel);
  r.Register("Split", SplitKernel);
  r.Register("Slice", SliceKernel);
  r.Register("SliceGrad", SliceGradKernel, kInternalDomain);
  r.Register("Expand", ExpandKernel);
  r.Register("Tile", TileKernel);
  r.Register("Pad", PadKernel);
  r.Register("DepthToSpace", [](const KernelContext& c) { return SpaceDepthKernel(c, true); });
  r.Register("SpaceToDepth", [](const KernelContext& c) { return SpaceDepthKernel(c, false); });
  shape_kernels::RegisterShapeIndexKernels(r);
}

}  // namespace ot
