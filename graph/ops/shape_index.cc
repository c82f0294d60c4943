// Op schemas of the shape family, part 2: indexing (Gather*, Scatter*), generators (Constant,
// ConstantOfShape, Range, EyeLike, OneHot), Trilu, TopK and the shape readers Shape and Size (which read only
// their input's shape, so the executor folds them whenever shapes are known).
#include <cmath>

#include "graph/infer_util.h"
#include "graph/op_registry.h"
#include "graph/ops/shape_util.h"

namespace ot {
namespace {
using namespace shape_ops;

void RequireIndexType(const InferContext& ctx, int i) {
  DataType t = ctx.input_type(i);
  if (t != DataType::kInt32 && t != DataType::kInt64)
    ctx.Fail("indices must be int32 or int64, got " + DataTypeName(t));
}

void InferGather(InferContext& ctx) {
  const Shape& data = ctx.Require(0);
  const Shape& idx = ctx.Require(1);
  RequireIndexType(ctx, 1);
  const DataType t = ctx.input_type(0);
  if (!data.known_rank() || !idx.known_rank()) {
    ctx.set_output(0, t, Shape());
    return;
  }
  if (data.rank() == 0) ctx.Fail("data must have rank >= 1");
  const int axis = NormalizeAxis(ctx, ctx.node.attr_int("axis", 0), data.rank());
  std::vector<Dim> out(data.dims().begin(), data.dims().begin() + axis);
  out.insert(out.end(), idx.dims().begin(), idx.dims().end());
  out.insert(out.end(), data.dims().begin() + axis + 1, data.dims().end());
  ctx.set_output(0, t, Shape(out));
}

// GatherElements (scatter = false) and ScatterElements/Scatter: indices and data share the rank.
void InferElements(InferContext& ctx, bool scatter) {
  const Shape& data = ctx.Require(0);
  const Shape& idx = ctx.Require(1);
  RequireIndexType(ctx, 1);
  const DataType t = ctx.input_type(0);
  if (data.known_rank()) {
    if (data.rank() == 0) ctx.Fail("data must have rank >= 1");
    NormalizeAxis(ctx, ctx.node.attr_int("axis", 0), data.rank());
    if (idx.known_rank() && idx.rank() != data.rank())
      ctx.Fail("indices rank " + std::to_string(idx.rank()) + " differs from data rank " + std::to_string(data.rank()));
  }
  if (scatter) {
    const Shape& upd = ctx.Require(2);
    if (ctx.input_type(2) != t) ctx.Fail("updates dtype differs from data");
    if (idx.is_static() && upd.is_static() && !(idx == upd))
      ctx.Fail("updates shape " + upd.ToString() + " differs from indices shape " + idx.ToString());
    ctx.set_output(0, t, data);
  } else {
    ctx.set_output(0, t, idx);
  }
}

void InferGatherND(InferContext& ctx) {
  const Shape& data = ctx.Require(0);
  const Shape& idx = ctx.Require(1);
  if (ctx.input_type(1) != DataType::kInt64) ctx.Fail("indices must be int64");
  const DataType t = ctx.input_type(0);
  const int64_t b = ctx.opset() >= 12 ? ctx.node.attr_int("batch_dims", 0) : 0;
  if (!data.known_rank() || !idx.known_rank() || idx.rank() == 0 || !idx[idx.rank() - 1].is_static()) {
    ctx.set_output(0, t, Shape());
    return;
  }
  const int r = data.rank(), q = idx.rank();
  const int64_t k = idx[q - 1].value;
  if (b < 0 || b >= std::min(r, q)) ctx.Fail("batch_dims " + std::to_string(b) + " is out of range");
  if (k < 1 || k > r - b) ctx.Fail("indices last dim " + std::to_string(k) + " is out of range");
  for (int d = 0; d < b; ++d)
    if (data[d].is_static() && idx[d].is_static() && data[d].value != idx[d].value)
      ctx.Fail("batch dim " + std::to_string(d) + " differs between data and indices");
  std::vector<Dim> out(idx.dims().begin(), idx.dims().end() - 1);
  out.insert(out.end(), data.dims().begin() + b + k, data.dims().end());
  ctx.set_output(0, t, Shape(out));
}

void InferScatterND(InferContext& ctx) {
  const Shape& data = ctx.Require(0);
  const Shape& idx = ctx.Require(1);
  const Shape& upd = ctx.Require(2);
  if (ctx.input_type(1) != DataType::kInt64) ctx.Fail("indices must be int64");
  const DataType t = ctx.input_type(0);
  if (ctx.input_type(2) != t) ctx.Fail("updates dtype differs from data");
  if (data.is_static() && idx.is_static() && upd.is_static()) {
    const int q = idx.rank();
    if (q == 0) ctx.Fail("indices must have rank >= 1");
    const int64_t k = idx[q - 1].value;
    if (k < 1 || k > data.rank()) ctx.Fail("indices last dim " + std::to_string(k) + " is out of range");
    std::vector<Dim> want(idx.dims().begin(), idx.dims().end() - 1);
    want.insert(want.end(), data.dims().begin() + k, data.dims().end());
    if (!(Shape(want) == upd)) ctx.Fail("updates shape " + upd.ToString() + " should be " + Shape(want).ToString());
  }
  ctx.set_output(0, t, data);
}

void CheckReduction(const InferContext& ctx, int max_min_from) {
  const std::string red = ctx.node.attr_string("reduction", "none");
  if (red == "none" || red == "add" || red == "mul") return;
  if ((red == "max" || red == "min") && ctx.opset() >= max_min_from) return;
  ctx.Fail("reduction '" + red + "' is not valid at opset " + std::to_string(ctx.opset()));
}

void InferShapeOp(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  if (!in.known_rank()) {
    ctx.set_output(0, DataType::kInt64, Shape({Dim()}));
    return;
  }
  auto [s, e] = ShapeRange(ctx.node, in.rank());
  ctx.set_output(0, DataType::kInt64, Shape({Dim(e - s)}));
}

void InferConstant(InferContext& ctx) {
  Tensor v = ConstantValue(ctx.node);
  ctx.set_output(0, v.dtype(), Shape::Static(v.dims()));
}

void InferConstantOfShape(InferContext& ctx) {
  const Shape& ss = ctx.Require(0);
  DataType t = DataType::kFloat32;
  if (const Attribute* a = ctx.node.attr("value")) {
    if (a->kind != Attribute::Kind::kTensor || a->t.empty_tensor()) ctx.Unsupported("value is not a supported tensor");
    if (a->t.numel() != 1) ctx.Fail("value must hold one element");
    t = a->t.dtype();
  }
  if (ctx.input_type(0) != DataType::kInt64) ctx.Fail("the shape input must be int64");
  std::optional<DimsValue> dims = ctx.input_dims_value(0);
  if (!dims) {
    if (ss.known_rank() && ss.rank() == 1 && ss[0].is_static())
      ctx.set_output(0, t, UnknownDims(static_cast<int>(ss[0].value)));
    else
      ctx.set_output(0, t, Shape());
    return;
  }
  ctx.set_output(0, t, Shape(SizesOf(ctx, *dims, "shape")));
}

void InferRange(InferContext& ctx) {
  const DataType t = ctx.input_type(0);
  for (int i = 0; i < 3; ++i) {
    const Shape& s = ctx.Require(i);
    if (ctx.input_type(i) != t) ctx.Fail("start, limit and delta must share a dtype");
    if (s.known_rank() && s.rank() != 0 && !(s.rank() == 1 && s[0].is_static() && s[0].value == 1))
      ctx.Fail("input " + std::to_string(i) + " must be a scalar, got " + s.ToString());
  }
  if (!IsFloat(t) && t != DataType::kInt16 && t != DataType::kInt32 && t != DataType::kInt64)
    ctx.Unsupported("dtype " + DataTypeName(t) + " is not supported");
  const Tensor* s = ctx.input_value(0);
  const Tensor* l = ctx.input_value(1);
  const Tensor* d = ctx.input_value(2);
  if (!s || !l || !d) {
    ctx.set_output(0, t, Shape({Dim()}));
    return;
  }
  int64_t n = 0;
  if (IsFloat(t)) {
    const double sv = s->GetDouble(0), lv = l->GetDouble(0), dv = d->GetDouble(0);
    if (dv == 0) ctx.Fail("delta is 0");
    n = static_cast<int64_t>(std::max(0.0, std::ceil((lv - sv) / dv)));
  } else {
    const int64_t sv = s->GetInt64(0), lv = l->GetInt64(0), dv = d->GetInt64(0);
    if (dv == 0) ctx.Fail("delta is 0");
    const int64_t span = lv - sv;
    if ((span > 0 && dv > 0) || (span < 0 && dv < 0)) n = (span + dv + (dv > 0 ? -1 : 1)) / dv;
  }
  ctx.set_output(0, t, Shape({Dim(n)}));
}

void InferTrilu(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  if (in.known_rank() && in.rank() < 2) ctx.Fail("input must have rank >= 2, got " + in.ToString());
  if (ctx.has_input(1) && ctx.input_type(1) != DataType::kInt64) ctx.Fail("k must be int64");
  PropagateInput0(ctx);
}

void InferOneHot(InferContext& ctx) {
  const Shape& idx = ctx.Require(0);
  ctx.Require(1);
  const Shape& vals = ctx.Require(2);
  const DataType t = ctx.input_type(2);
  if (vals.is_static() && NumElements(vals.StaticDims()) != 2) ctx.Fail("values must hold 2 elements");
  if (!idx.known_rank()) {
    ctx.set_output(0, t, Shape());
    return;
  }
  const int r = idx.rank() + 1;
  int64_t axis = ctx.node.attr_int("axis", -1);
  if (axis < -r || axis >= r)
    ctx.Fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  Dim depth;
  if (const Tensor* d = ctx.input_value(1)) {
    if (d->numel() != 1) ctx.Fail("depth must hold one element");
    const int64_t v = static_cast<int64_t>(d->GetDouble(0));
    if (v < 1) ctx.Fail("depth must be positive, got " + std::to_string(v));
    depth = Dim(v);
  }
  std::vector<Dim> out = idx.dims();
  out.insert(out.begin() + axis, depth);
  ctx.set_output(0, t, Shape(out));
}

void InferEyeLike(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  if (in.known_rank() && in.rank() != 2) ctx.Fail("input must have rank 2, got " + in.ToString());
  DataType t = ctx.input_type(0);
  if (ctx.node.has_attr("dtype")) {
    const int64_t e = ctx.node.attr_int("dtype", 0);
    if (!IsSupportedDataType(static_cast<int32_t>(e)))
      ctx.Unsupported("dtype " + std::to_string(e) + " is not supported");
    t = static_cast<DataType>(e);
  }
  ctx.set_output(0, t, in.known_rank() ? in : UnknownDims(2));
}

void InferTopK(InferContext& ctx) {
  const Shape& in = ctx.Require(0);
  const DataType t = ctx.input_type(0);
  std::optional<int64_t> k;
  if (ctx.opset() < 10) {
    if (!ctx.node.has_attr("k")) ctx.Fail("the k attribute is required");
    k = ctx.node.attr_int("k", 0);
  } else {
    ctx.Require(1);
    if (auto v = InputInts(ctx, 1)) {
      if (v->size() != 1) ctx.Fail("K must hold one value");
      k = (*v)[0];
    }
  }
  if (k && *k < 0) ctx.Fail("k must be non-negative, got " + std::to_string(*k));
  if (!in.known_rank()) {
    ctx.set_output(0, t, Shape());
    ctx.set_output(1, DataType::kInt64, Shape());
    return;
  }
  const int axis = NormalizeAxis(ctx, ctx.node.attr_int("axis", -1), in.rank());
  std::vector<Dim> out = in.dims();
  if (k && in[axis].is_static() && *k > in[axis].value)
    ctx.Fail("k = " + std::to_string(*k) + " exceeds the axis size " + std::to_string(in[axis].value));
  out[axis] = k ? Dim(*k) : Dim();
  ctx.set_output(0, t, Shape(out));
  ctx.set_output(1, DataType::kInt64, Shape(out));
}

}  // namespace

namespace shape_ops {
void RegisterShapeIndexOps(OpRegistry& r) {
  r.Register(Schema("Gather", 1, InferGather));
  r.Register(Schema("GatherElements", 11, [](InferContext& c) { InferElements(c, false); }));
  r.Register(Schema("GatherND", 11, InferGatherND));
  r.Register(Schema("ScatterElements", 11, [](InferContext& c) {
    CheckReduction(c, 18);
    InferElements(c, true);
  }));
  r.Register(Schema("Scatter", 9, [](InferContext& c) { InferElements(c, true); }));
  r.Register(Schema("ScatterND", 11, [](InferContext& c) {
    CheckReduction(c, 18);
    InferScatterND(c);
  }));
  r.Register(Schema("Shape", 1, InferShapeOp, {}, /*reads_input_data=*/false));
  r.Register(Schema(
      "Size", 1,
      [](InferContext& c) {
        c.Require(0);
        c.set_output(0, DataType::kInt64, Shape::Scalar());
      },
      {}, /*reads_input_data=*/false));
  r.Register(Schema("Constant", 1, InferConstant));
  r.Register(Schema("ConstantOfShape", 9, InferConstantOfShape, {0}));
  r.Register(Schema("Range", 11, InferRange, {0, 1, 2}));
  r.Register(Schema("Trilu", 14, InferTrilu, {1}));
  r.Register(Schema("OneHot", 9, InferOneHot, {1}));
  r.Register(Schema("EyeLike", 9, InferEyeLike));
  r.Register(Schema("TopK", 1, InferTopK, {1}));
}
}  // namespace shape_ops

}  // namespace ot
