// Op schemas of the elementwise family: unary math and activations, Cast/CastLike, Clip, Dropout, binary
// arithmetic and comparisons (numpy broadcasting; opset < 7 `broadcast`/`axis` attributes), logic, Where,
// Mod, PRelu, BitShift and the variadic Sum/Mean/Max/Min.
#include <string>
#include <vector>

#include "graph/error.h"
#include "graph/infer_util.h"
#include "graph/op_registry.h"
#include "graph/ops/register_all.h"

namespace ot {
namespace {

void RequireTensor(const InferContext& ctx, int i) {
  DataType t = ctx.input_type(i);
  if (t == DataType::kUndefined || t == DataType::kString)
    ctx.Unsupported("input " + std::to_string(i) + " has type " + DataTypeName(t) +
                    " (only numeric and bool tensors are supported)");
}

void InferSameAsInput0(InferContext& ctx) {
  ctx.Require(0);
  RequireTensor(ctx, 0);
  PropagateInput0(ctx);
}

// A unary op: one input, one output, of the input's type and shape.
void InferUnary(InferContext& ctx) {
  ctx.RequireArity(1, 1, 1);
  InferSameAsInput0(ctx);
}

void InferBoolOfInput0(InferContext& ctx) {
  ctx.RequireArity(1, 1, 1);
  ctx.Require(0);
  RequireTensor(ctx, 0);
  ctx.set_output(0, DataType::kBool, ctx.input_shape(0));
}

// Opset < 7 binary ops: without `broadcast` the shapes must be equal; with broadcast=1, B's shape is a
// contiguous run of A's dims starting at `axis` (default: B aligned to A's trailing dims), and the output
// has A's shape.
Shape LegacyBroadcast(const InferContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (ctx.node.attr_int("broadcast", 0) == 0) {
    if (a.known_rank() && b.known_rank()) {
      bool same = a.rank() == b.rank();
      for (int i = 0; same && i < a.rank(); ++i)
        if (a[i].is_static() && b[i].is_static() && a[i].value != b[i].value) same = false;
      if (!same)
        ctx.Fail("shapes " + a.ToString() + " and " + b.ToString() + " differ and the broadcast attribute is 0");
    }
    return a.known_rank() ? a : b;
  }
  if (!a.known_rank() || !b.known_rank()) return a;
  if (b.rank() > a.rank()) ctx.Fail("broadcast input B " + b.ToString() + " has a higher rank than A " + a.ToString());
  int64_t axis = ctx.node.has_attr("axis") ? ctx.node.attr_int("axis", 0) : a.rank() - b.rank();
  if (axis < 0) axis += a.rank();
  if (axis < 0 || axis + b.rank() > a.rank())
    ctx.Fail("broadcast axis " + std::to_string(axis) + " does not fit B " + b.ToString() + " into A " + a.ToString());
  for (int i = 0; i < b.rank(); ++i) {
    const Dim& da = a[static_cast<int>(axis) + i];
    const Dim& db = b[i];
    if (db.is_static() && db.value != 1 && da.is_static() && da.value != db.value)
      ctx.Fail("broadcast input B " + b.ToString() + " does not match A " + a.ToString() + " at axis " +
               std::to_string(axis));
  }
  return a;
}

void InferBinary(InferContext& ctx, bool bool_out, bool same_types, bool legacy_broadcast) {
  ctx.RequireArity(2, 2, 1);
  ctx.Require(0);
  ctx.Require(1);
  RequireTensor(ctx, 0);
  RequireTensor(ctx, 1);
  DataType t = ctx.input_type(0);
  if (same_types && ctx.input_type(1) != t)
    ctx.Fail("input types differ: " + DataTypeName(t) + " and " + DataTypeName(ctx.input_type(1)));
  Shape s = legacy_broadcast && ctx.opset() < 7 ? LegacyBroadcast(ctx)
                                                : BroadcastShapes(ctx, {ctx.input_shape(0), ctx.input_shape(1)});
  ctx.set_output(0, bool_out ? DataType::kBool : t, s);
}

void InferVariadic(InferContext& ctx) {
  if (ctx.num_inputs() == 0) ctx.Fail("needs at least one input");
  std::vector<Shape> shapes;
  DataType t = DataType::kUndefined;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    ctx.Require(i);
    RequireTensor(ctx, i);
    if (i == 0)
      t = ctx.input_type(0);
    else if (ctx.input_type(i) != t)
      ctx.Fail("input types differ: " + DataTypeName(t) + " and " + DataTypeName(ctx.input_type(i)));
    shapes.push_back(ctx.input_shape(i));
  }
  ctx.set_output(0, t, BroadcastShapes(ctx, shapes));
}

// ONNX TensorProto type enum -> DataType for Cast's `to`; Unsupported for string, float8, int4, complex...
DataType CastTarget(const InferContext& ctx) {
  const Attribute* to = ctx.node.attr("to");
  if (!to) ctx.Fail("attribute 'to' is missing");
  if (to->kind == Attribute::Kind::kString) {  // opset 1-5 spell the type as a string
    static const std::vector<std::pair<std::string, DataType>> names = {
        {"FLOAT", DataType::kFloat32}, {"FLOAT16", DataType::kFloat16}, {"DOUBLE", DataType::kFloat64},
        {"INT8", DataType::kInt8},     {"INT16", DataType::kInt16},     {"INT32", DataType::kInt32},
        {"INT64", DataType::kInt64},   {"UINT8", DataType::kUint8},     {"UINT16", DataType::kUint16},
        {"UINT32", DataType::kUint32}, {"UINT64", DataType::kUint64},   {"BOOL", DataType::kBool}};
    for (const auto& [n, t] : names)
      if (n == to->s) return t;
    ctx.Unsupported("Cast to '" + to->s + "' is not supported");
  }
  const int64_t v = to->i;
  if (v == static_cast<int64_t>(DataType::kString)) ctx.Unsupported("Cast to string is not supported");
  if (!IsSupportedDataType(static_cast<int32_t>(v)) || v == 0)
    ctx.Unsupported("Cast to ONNX type " + std::to_string(v) + " is not supported");
  return static_cast<DataType>(v);
}

void InferCast(InferContext& ctx) {
  ctx.Require(0);
  RequireTensor(ctx, 0);
  ctx.set_output(0, CastTarget(ctx), ctx.input_shape(0));
}

void InferCastLike(InferContext& ctx) {
  ctx.Require(0);
  ctx.Require(1);
  RequireTensor(ctx, 0);
  RequireTensor(ctx, 1);
  ctx.set_output(0, ctx.input_type(1), ctx.input_shape(0));
}

void RequireScalarInput(const InferContext& ctx, int i, const char* what) {
  if (!ctx.has_input(i)) return;
  const Shape& s = ctx.input_shape(i);
  auto n = s.NumElements();
  if (n && *n != 1) ctx.Fail(std::string(what) + " must be a scalar, got shape " + s.ToString());
  if (ctx.input_type(i) != ctx.input_type(0))
    ctx.Fail(std::string(what) + " has type " + DataTypeName(ctx.input_type(i)) + ", input is " +
             DataTypeName(ctx.input_type(0)));
}

void InferClip(InferContext& ctx) {
  InferSameAsInput0(ctx);
  if (ctx.opset() >= 11) {
    RequireScalarInput(ctx, 1, "min");
    RequireScalarInput(ctx, 2, "max");
  }
}

void InferDropout(InferContext& ctx) {
  InferSameAsInput0(ctx);
  DataType x = ctx.input_type(0);
  if (!IsFloat(x)) ctx.Fail("input type " + DataTypeName(x) + " is not a floating type");
  if (ctx.opset() >= 12) {
    if (ctx.has_input(1)) {
      auto n = ctx.input_shape(1).NumElements();
      if (n && *n != 1) ctx.Fail("ratio must be a scalar, got shape " + ctx.input_shape(1).ToString());
      if (!IsFloat(ctx.input_type(1))) ctx.Fail("ratio must be a floating type");
    }
    if (ctx.has_input(2) && ctx.input_type(2) != DataType::kBool) ctx.Fail("training_mode must be bool");
  }
  if (ctx.has_output(1)) ctx.set_output(1, ctx.opset() >= 10 ? DataType::kBool : x, ctx.input_shape(0));
}

void InferWhere(InferContext& ctx) {
  for (int i = 0; i < 3; ++i) {
    ctx.Require(i);
    RequireTensor(ctx, i);
  }
  if (ctx.input_type(0) != DataType::kBool) ctx.Fail("condition must be bool, got " + DataTypeName(ctx.input_type(0)));
  if (ctx.input_type(1) != ctx.input_type(2))
    ctx.Fail("X and Y types differ: " + DataTypeName(ctx.input_type(1)) + " and " + DataTypeName(ctx.input_type(2)));
  ctx.set_output(0, ctx.input_type(1),
                 BroadcastShapes(ctx, {ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2)}));
}

void InferPRelu(InferContext& ctx) {
  ctx.Require(0);
  ctx.Require(1);
  RequireTensor(ctx, 0);
  if (ctx.input_type(1) != ctx.input_type(0))
    ctx.Fail("slope type " + DataTypeName(ctx.input_type(1)) + " differs from X " + DataTypeName(ctx.input_type(0)));
  const Shape& x = ctx.input_shape(0);
  const Shape& s = ctx.input_shape(1);
  if (x.is_static() && s.is_static()) {
    // Opset < 7: a 1-D slope of X's channel count applies along axis 1 (checked by the kernel); otherwise the
    // slope broadcasts unidirectionally to X.
    bool legacy_channel = ctx.opset() < 7 && s.rank() == 1 && x.rank() >= 2 && s[0].value == x[1].value;
    if (!legacy_channel) {
      Shape b = BroadcastShapes(ctx, {x, s});
      if (!(b == x)) ctx.Fail("slope " + s.ToString() + " does not broadcast to X " + x.ToString());
    }
  }
  PropagateInput0(ctx);
}

void Reg(OpRegistry& r, const std::string& op, int min_opset, InferFn fn,
         FusibleKind fusible = FusibleKind::kElementwise, std::vector<int> value_inputs = {}) {
  OpSchema s;
  s.op_type = op;
  s.domain = "";
  s.min_opset = min_opset;
  s.infer = std::move(fn);
  s.fusible = fusible;
  s.value_inputs = std::move(value_inputs);
  r.Register(std::move(s));
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  // Unary, same type and shape. Opsets 1-5 of the oldest ops differ only by `consumed_inputs` (ignored).
  const std::vector<std::pair<const char*, int>> unary = {
      {"Abs", 1},    {"Neg", 1},        {"Exp", 1},      {"Log", 1},
      {"Sqrt", 1},   {"Reciprocal", 1}, {"Relu", 1},     {"LeakyRelu", 1},
      {"Elu", 1},    {"Selu", 1},       {"Sigmoid", 1},  {"HardSigmoid", 1},
      {"Tanh", 1},   {"Erf", 9},        {"Softplus", 1}, {"Softsign", 1},
      {"Sin", 7},    {"Cos", 7},        {"Tan", 7},      {"Asin", 7},
      {"Acos", 7},   {"Atan", 7},       {"Sinh", 9},     {"Cosh", 9},
      {"Asinh", 9},  {"Acosh", 9},      {"Atanh", 9},    {"Floor", 1},
      {"Ceil", 1},   {"Round", 11},     {"Sign", 9},     {"ThresholdedRelu", 10},
      {"Celu", 12},  {"HardSwish", 14}, {"Mish", 18},    {"Gelu", 20},
      {"Shrink", 9}, {"Identity", 1},   {"Not", 1},
  };
  for (const auto& [op, v] : unary) Reg(r, op, v, InferUnary);
  Reg(r, "IsNaN", 9, InferBoolOfInput0);
  Reg(r, "IsInf", 10, InferBoolOfInput0);
  Reg(r, "Cast", 1, InferCast);
  Reg(r, "CastLike", 15, InferCastLike);
  Reg(r, "Clip", 1, InferClip);
  // Dropout draws random numbers in training mode: not fused (a fused cluster would need the RNG stream).
  // ratio (1) and training_mode (2) decide at plan time whether the kernel is random or an identity.
  Reg(r, "Dropout", 1, InferDropout, FusibleKind::kOpaque, {1, 2});

  // Binary with broadcasting. legacy: opset < 7 takes `broadcast`/`axis` attributes.
  struct Bin {
    const char* op;
    int min_opset;
    bool bool_out, same_types, legacy;
  };
  const std::vector<Bin> binary = {
      {"Add", 1, false, true, true},          {"Sub", 1, false, true, true},
      {"Mul", 1, false, true, true},          {"Div", 1, false, true, true},
      {"Pow", 1, false, false, true},         {"Mod", 10, false, true, false},
      {"BitShift", 11, false, true, false},   {"Equal", 1, true, true, true},
      {"Less", 1, true, true, true},          {"Greater", 1, true, true, true},
      {"LessOrEqual", 12, true, true, false}, {"GreaterOrEqual", 12, true, true, false},
      {"And", 1, true, true, true},           {"Or", 1, true, true, true},
      {"Xor", 1, true, true, true},
  };
  for (const Bin& b : binary) {
    Reg(r, b.op, b.min_opset, [b](InferContext& ctx) { InferBinary(ctx, b.bool_out, b.same_types, b.legacy); });
  }
  Reg(r, "PRelu", 1, InferPRelu);
  Reg(r, "Where", 9, InferWhere);
  for (const char* op : {"Sum", "Mean", "Max", "Min"}) Reg(r, op, 1, InferVariadic);
}

}  // namespace ot
