// Op schemas of the linalg family: MatMul, Gemm, Conv, ConvTranspose, MaxPool, AveragePool, LpPool,
// GlobalAveragePool, GlobalMaxPool, GlobalLpPool, Einsum; the integer/quantized MatMulInteger, ConvInteger,
// QLinearMatMul, QLinearConv. Geometry (output sizes, pads) comes from
// graph/ops/linalg_util.h, which the CPU kernels use too.
#include <algorithm>
#include <stdexcept>

#include "graph/infer_util.h"
#include "graph/op_registry.h"
#include "graph/ops/linalg_util.h"
#include "graph/ops/register_all.h"

namespace ot {

namespace {

void RequireSameType(InferContext& ctx, int a, int b) {
  if (ctx.has_input(a) && ctx.has_input(b) && ctx.input_type(a) != ctx.input_type(b))
    ctx.Fail("input " + std::to_string(b) + " has dtype " + DataTypeName(ctx.input_type(b)) + " but input " +
             std::to_string(a) + " has " + DataTypeName(ctx.input_type(a)));
}

// Two dims that must agree (K of a GEMM, channels): a mismatch of static values is a user error.
void CheckDimsMatch(InferContext& ctx, const Dim& a, const Dim& b, const std::string& what) {
  if (a.is_static() && b.is_static() && a.value != b.value)
    ctx.Fail(what + " mismatch: " + std::to_string(a.value) + " vs " + std::to_string(b.value));
}

// numpy matmul of inputs ai and bi; the output dtype is `t` (kUndefined: A's, and B must match it).
void InferMatMulOf(InferContext& ctx, int ai, int bi, DataType t) {
  const Shape& a = ctx.Require(ai);
  const Shape& b = ctx.Require(bi);
  if (t == DataType::kUndefined) {
    RequireSameType(ctx, ai, bi);
    t = ctx.input_type(ai);
  }
  if (!a.known_rank() || !b.known_rank()) {
    ctx.set_output(0, t, Shape());
    return;
  }
  if (a.rank() == 0 || b.rank() == 0) ctx.Fail("MatMul operands must have rank >= 1");
  const Dim ka = a[a.rank() - 1];
  const Dim kb = b.rank() == 1 ? b[0] : b[b.rank() - 2];
  CheckDimsMatch(ctx, ka, kb, "MatMul inner dimension (A " + a.ToString() + ", B " + b.ToString() + ")");
  std::vector<Dim> ab, bb;
  if (a.rank() > 2) ab.assign(a.dims().begin(), a.dims().end() - 2);
  if (b.rank() > 2) bb.assign(b.dims().begin(), b.dims().end() - 2);
  Shape batch = BroadcastShapes(ctx, {Shape(ab), Shape(bb)});
  std::vector<Dim> out = batch.dims();
  if (a.rank() >= 2) out.push_back(a[a.rank() - 2]);
  if (b.rank() >= 2) out.push_back(b[b.rank() - 1]);
  ctx.set_output(0, t, Shape(out));
}

void InferMatMul(InferContext& ctx) { InferMatMulOf(ctx, 0, 1, DataType::kUndefined); }
void InferMatMulInteger(InferContext& ctx) { InferMatMulOf(ctx, 0, 1, DataType::kInt32); }
// QLinearMatMul: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
void InferQLinearMatMul(InferContext& ctx) {
  ctx.Require(7);
  InferMatMulOf(ctx, 0, 3, ctx.input_type(7));
}

void InferGemm(InferContext& ctx) {
  const Shape& a = ctx.Require(0);
  const Shape& b = ctx.Require(1);
  RequireSameType(ctx, 0, 1);
  RequireSameType(ctx, 0, 2);
  if (ctx.opset() < 11 && !ctx.has_input(2)) ctx.Fail("input C is required before opset 11");
  const DataType t = ctx.input_type(0);
  if ((a.known_rank() && a.rank() != 2) || (b.known_rank() && b.rank() != 2))
    ctx.Fail("Gemm operands must be 2-D, got A " + a.ToString() + " and B " + b.ToString());
  const bool ta = ctx.node.attr_int("transA", 0) != 0, tb = ctx.node.attr_int("transB", 0) != 0;
  Dim m, n;
  if (a.known_rank()) m = a[ta ? 1 : 0];
  if (b.known_rank()) n = b[tb ? 0 : 1];
  if (a.known_rank() && b.known_rank())
    CheckDimsMatch(ctx, a[ta ? 0 : 1], b[tb ? 1 : 0],
                   "Gemm inner dimension (A " + a.ToString() + ", B " + b.ToString() + ")");
  if (ctx.has_input(2)) {
    const Shape& c = ctx.input_shape(2);
    if (c.known_rank()) {
      if (c.rank() > 2) ctx.Fail("C must have rank <= 2, got " + c.ToString());
      // Unidirectional broadcast of C to [M, N].
      const Dim* target[2] = {&m, &n};
      for (int i = 0; i < c.rank(); ++i) {
        const Dim& d = c[i];
        const Dim& o = *target[2 - c.rank() + i];
        if (d.is_static() && d.value == 1) continue;
        if (d.is_static() && o.is_static() && d.value != o.value)
          ctx.Fail("C " + c.ToString() + " does not broadcast to [M, N] = [" + m.ToString() + "," + n.ToString() + "]");
      }
    }
  }
  ctx.set_output(0, t, Shape({m, n}));
}

// Spatial attributes of a conv/pool node for `r` spatial dims, with ONNX defaults.
struct SpatialAttrs {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begin..., end...
  std::string auto_pad;
};

SpatialAttrs ReadSpatialAttrs(InferContext& ctx, int r, const std::vector<int64_t>& kernel) {
  const Node& n = ctx.node;
  SpatialAttrs s;
  s.kernel = kernel;
  s.strides = n.attr_ints("strides", std::vector<int64_t>(r, 1));
  s.dilations = n.attr_ints("dilations", std::vector<int64_t>(r, 1));
  s.pads = n.attr_ints("pads", std::vector<int64_t>(2 * r, 0));
  s.auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (static_cast<int>(s.kernel.size()) != r) ctx.Fail("kernel_shape must have " + std::to_string(r) + " values");
  if (static_cast<int>(s.strides.size()) != r) ctx.Fail("strides must have " + std::to_string(r) + " values");
  if (static_cast<int>(s.dilations.size()) != r) ctx.Fail("dilations must have " + std::to_string(r) + " values");
  if (static_cast<int>(s.pads.size()) != 2 * r) ctx.Fail("pads must have " + std::to_string(2 * r) + " values");
  for (int i = 0; i < r; ++i) {
    if (s.kernel[i] < 1) ctx.Fail("kernel_shape values must be >= 1");
    if (s.strides[i] < 1) ctx.Fail("strides must be >= 1");
    if (s.dilations[i] < 1) ctx.Fail("dilations must be >= 1");
    if (s.pads[i] < 0 || s.pads[r + i] < 0) ctx.Fail("pads must be >= 0");
  }
  if (s.auto_pad != "NOTSET" && s.auto_pad != "VALID" && s.auto_pad != "SAME_UPPER" && s.auto_pad != "SAME_LOWER")
    ctx.Fail("auto_pad '" + s.auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  return s;
}

// Output spatial dims of a conv/pool over input `x` (rank >= 3).
std::vector<Dim> PoolSpatial(InferContext& ctx, const Shape& x, const SpatialAttrs& s, bool ceil_mode) {
  const int r = x.rank() - 2;
  std::vector<Dim> out;
  for (int i = 0; i < r; ++i) {
    const Dim& d = x[2 + i];
    auto g = linalg::ConvAxis(d.is_static() ? d.value : -1, s.kernel[i], s.strides[i], s.dilations[i], s.pads[i],
                              s.pads[r + i], s.auto_pad, ceil_mode);
    if (d.is_static() && g.out < 1)
      ctx.Fail("spatial dim " + std::to_string(i) + " of size " + std::to_string(d.value) +
               " is too small for the kernel (output size " + std::to_string(g.out) + ")");
    out.push_back(g.out >= 0 ? Dim(g.out) : Dim());
  }
  return out;
}

// [N, spatial..., C] (attribute channels_last = 1) as [N, C, spatial...], and back.
Shape ChannelsFirstShape(const Shape& v) {
  if (!v.known_rank() || v.rank() < 3) return v;
  std::vector<Dim> d{v[0], v[v.rank() - 1]};
  for (int i = 1; i + 1 < v.rank(); ++i) d.push_back(v[i]);
  return Shape(d);
}
Shape ChannelsLastShape(const std::vector<Dim>& d) {
  std::vector<Dim> r{d[0]};
  r.insert(r.end(), d.begin() + 2, d.end());
  r.push_back(d[1]);
  return Shape(r);
}

// Conv / ConvTranspose geometry over X = input xi, W = input wi, optional bias bi (-1: none); output dtype t
// (kUndefined: X's, and W and the bias must match it).
// Attribute channels_last = 1 (the CPU's channels_last pass; not for ConvTranspose): X and Y are stored
// [N, spatial..., C]; the geometry below reads X as [N, C, spatial...] and Y is written back channels-last.
void InferConvOf(InferContext& ctx, int xi, int wi, int bi, DataType t) {
  const bool channels_last = ctx.node.attr_int("channels_last", 0) != 0;
  if (channels_last && ctx.node.op_type != "Conv") ctx.Fail("channels_last applies to Conv only");
  const Shape x = channels_last ? ChannelsFirstShape(ctx.Require(xi)) : ctx.Require(xi);
  const Shape& w = ctx.Require(wi);
  const auto set_y = [&](const std::vector<Dim>& out) {
    ctx.set_output(0, t, channels_last ? ChannelsLastShape(out) : Shape(out));
  };
  if (t == DataType::kUndefined) {
    RequireSameType(ctx, xi, wi);
    if (bi >= 0) RequireSameType(ctx, xi, bi);
    t = ctx.input_type(xi);
  }
  const Node& n = ctx.node;
  const int64_t group = n.attr_int("group", 1);
  if (group < 1) ctx.Fail("group must be >= 1");
  int rank = x.known_rank() ? x.rank() : (w.known_rank() ? w.rank() : -1);
  if (rank < 0) {
    ctx.set_output(0, t, Shape());
    return;
  }
  if (rank < 3) ctx.Fail("input X must have rank >= 3 ([N, C, spatial...]), got " + x.ToString());
  if (x.known_rank() && w.known_rank() && x.rank() != w.rank())
    ctx.Fail("X " + x.ToString() + " and W " + w.ToString() + " must have the same rank");
  const int r = rank - 2;
  std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
  if (w.known_rank()) {
    std::vector<int64_t> wk;
    for (int i = 0; i < r; ++i) wk.push_back(w[2 + i].is_static() ? w[2 + i].value : -1);
    if (!kernel.empty()) {
      if (static_cast<int>(kernel.size()) != r) ctx.Fail("kernel_shape must have " + std::to_string(r) + " values");
      for (int i = 0; i < r; ++i)
        if (wk[i] >= 0 && wk[i] != kernel[i]) ctx.Fail("kernel_shape does not match W " + w.ToString());
    } else {
      kernel = wk;
    }
  }
  const bool transpose = n.op_type == "ConvTranspose";
  Dim out_c;
  if (w.known_rank()) {
    if (!transpose) {
      out_c = w[0];
      if (w[0].is_static() && w[0].value % group != 0)
        ctx.Fail("W's output channels " + std::to_string(w[0].value) + " are not divisible by group " +
                 std::to_string(group));
      if (x.known_rank() && x[1].is_static() && w[1].is_static() && x[1].value != w[1].value * group)
        ctx.Fail("X has " + std::to_string(x[1].value) + " channels but W " + w.ToString() + " with group " +
                 std::to_string(group) + " expects " + std::to_string(w[1].value * group));
    } else {
      if (w[1].is_static()) out_c = Dim(w[1].value * group);
      if (x.known_rank())
        CheckDimsMatch(ctx, x[1], w[0],
                       "ConvTranspose input channels (X " + x.ToString() + ", W " + w.ToString() + ")");
      if (w[0].is_static() && w[0].value % group != 0) ctx.Fail("W's input channels are not divisible by group");
    }
  }
  if (bi >= 0 && ctx.has_input(bi)) {
    const Shape& b = ctx.input_shape(bi);
    if (b.known_rank() && b.rank() != 1) ctx.Fail("bias B must be 1-D, got " + b.ToString());
    if (b.known_rank()) CheckDimsMatch(ctx, b[0], out_c, "bias length vs output channels");
  }
  std::vector<Dim> out{x.known_rank() ? x[0] : Dim(), out_c};
  const bool kernel_known = static_cast<int>(kernel.size()) == r &&
                            std::all_of(kernel.begin(), kernel.end(), [](int64_t k) { return k >= 0; });
  if (!kernel_known || !x.known_rank()) {
    for (int i = 0; i < r; ++i) out.push_back(Dim());
    set_y(out);
    return;
  }
  SpatialAttrs s = ReadSpatialAttrs(ctx, r, kernel);
  if (!transpose) {
    auto sp = PoolSpatial(ctx, x, s, false);
    out.insert(out.end(), sp.begin(), sp.end());
  } else {
    auto op = n.attr_ints("output_padding", std::vector<int64_t>(r, 0));
    auto os = n.attr_ints("output_shape");
    if (static_cast<int>(op.size()) != r) ctx.Fail("output_padding must have " + std::to_string(r) + " values");
    if (!os.empty() && static_cast<int>(os.size()) != r) {
      // output_shape may also list N and C (older exporters); keep the spatial tail.
      if (static_cast<int>(os.size()) == r + 2)
        os.erase(os.begin(), os.begin() + 2);
      else
        ctx.Fail("output_shape must have " + std::to_string(r) + " values");
    }
    for (int i = 0; i < r; ++i) {
      const Dim& d = x[2 + i];
      auto g = linalg::ConvTransposeAxis(d.is_static() ? d.value : -1, s.kernel[i], s.strides[i], s.dilations[i],
                                         s.pads[i], s.pads[r + i], op[i], os.empty() ? -1 : os[i], s.auto_pad);
      if (g.out == 0 || g.out < -1)
        ctx.Fail("output spatial dim " + std::to_string(i) + " would be " + std::to_string(g.out));
      out.push_back(g.out >= 0 ? Dim(g.out) : Dim());
    }
  }
  set_y(out);
}

void InferConv(InferContext& ctx) { InferConvOf(ctx, 0, 1, 2, DataType::kUndefined); }
void InferConvInteger(InferContext& ctx) { InferConvOf(ctx, 0, 1, -1, DataType::kInt32); }
// QLinearConv: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
void InferQLinearConv(InferContext& ctx) {
  ctx.Require(7);
  InferConvOf(ctx, 0, 3, 8, ctx.input_type(7));
}

// channels_last = 1 (MaxPool, AveragePool; the channels_last pass): X and Y stored [N, spatial..., C].
void InferPool(InferContext& ctx) {
  const Node& n = ctx.node;
  const bool global = n.op_type.rfind("Global", 0) == 0;
  const bool last = n.attr_int("channels_last", 0) != 0;
  if (last && n.op_type != "MaxPool" && n.op_type != "AveragePool")
    ctx.Fail("channels_last applies to MaxPool and AveragePool only");
  const Shape x = last ? ChannelsFirstShape(ctx.Require(0)) : ctx.Require(0);
  const DataType t = ctx.input_type(0);
  if (!x.known_rank()) {
    ctx.set_output(0, t, Shape());
    if (ctx.has_output(1)) ctx.set_output(1, DataType::kInt64, Shape());
    return;
  }
  if (x.rank() < 3) ctx.Fail("input X must have rank >= 3 ([N, C, spatial...]), got " + x.ToString());
  const int r = x.rank() - 2;
  std::vector<Dim> out{x[0], x[1]};
  if (global) {
    for (int i = 0; i < r; ++i) out.push_back(Dim(1));
  } else {
    if (!n.has_attr("kernel_shape")) ctx.Fail("attribute kernel_shape is required");
    SpatialAttrs s = ReadSpatialAttrs(ctx, r, n.attr_ints("kernel_shape"));
    if (n.op_type == "MaxPool" && n.attr_int("storage_order", 0) != 0 && n.attr_int("storage_order", 0) != 1)
      ctx.Fail("storage_order must be 0 or 1");
    auto sp = PoolSpatial(ctx, x, s, n.attr_int("ceil_mode", 0) != 0);
    out.insert(out.end(), sp.begin(), sp.end());
  }
  const Shape y = last ? ChannelsLastShape(out) : Shape(out);
  ctx.set_output(0, t, y);
  if (ctx.has_output(1)) ctx.set_output(1, DataType::kInt64, y);
}

void InferEinsum(InferContext& ctx) {
  const Node& n = ctx.node;
  if (ctx.num_inputs() == 0) ctx.Fail("Einsum needs at least one input");
  std::vector<int> ranks;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Shape& s = ctx.Require(i);
    RequireSameType(ctx, 0, i);
    if (!s.known_rank()) {
      ctx.set_output(0, ctx.input_type(0), Shape());
      return;
    }
    ranks.push_back(s.rank());
  }
  if (!n.has_attr("equation")) ctx.Fail("attribute equation is required");
  linalg::EinsumEquation eq;
  try {
    eq = linalg::ParseEinsum(n.attr_string("equation", ""), ranks);
  } catch (const std::invalid_argument& e) {
    ctx.Fail(e.what());
  }
  // Size of each label: equal across operands, or 1 where it broadcasts.
  std::vector<Dim> label(52 + eq.ellipsis_rank, Dim(1));
  std::vector<bool> seen(label.size(), false);
  for (size_t i = 0; i < eq.inputs.size(); ++i) {
    const Shape& s = ctx.input_shape(static_cast<int>(i));
    for (size_t a = 0; a < eq.inputs[i].size(); ++a) {
      const int l = eq.inputs[i][a];
      const Dim& d = s[static_cast<int>(a)];
      if (!seen[l]) {
        label[l] = d;
        seen[l] = true;
        continue;
      }
      if (d.is_static() && d.value == 1) continue;
      if (label[l].is_static() && label[l].value == 1) {
        label[l] = d;
        continue;
      }
      if (d.is_static() && label[l].is_static() && d.value != label[l].value)
        ctx.Fail("label sizes disagree in equation '" + n.attr_string("equation", "") +
                 "': " + std::to_string(label[l].value) + " vs " + std::to_string(d.value));
      if (!(d == label[l]) && !d.is_static()) label[l] = label[l].is_static() ? label[l] : Dim();
    }
  }
  std::vector<Dim> out;
  for (int l : eq.output) out.push_back(label[l]);
  ctx.set_output(0, ctx.input_type(0), Shape(out));
}

}  // namespace

void RegisterLinalgOps(OpRegistry& r) {
  auto reg = [&](const char* op, int min_opset, InferFn fn) {
    OpSchema s;
    s.op_type = op;
    s.min_opset = min_opset;
    s.infer = std::move(fn);
    r.Register(std::move(s));
  };
  reg("MatMul", 1, InferMatMul);
  reg("Gemm", 1, InferGemm);
  reg("Conv", 1, InferConv);
  reg("ConvTranspose", 1, InferConv);
  reg("MaxPool", 1, InferPool);
  reg("AveragePool", 1, InferPool);
  reg("LpPool", 1, InferPool);
  reg("GlobalAveragePool", 1, InferPool);
  reg("GlobalMaxPool", 1, InferPool);
  reg("GlobalLpPool", 1, InferPool);
  reg("Einsum", 12, InferEinsum);
  reg("MatMulInteger", 10, InferMatMulInteger);
  reg("ConvInteger", 10, InferConvInteger);
  reg("QLinearMatMul", 10, InferQLinearMatMul);
  reg("QLinearConv", 10, InferQLinearConv);
}

}  // namespace ot
