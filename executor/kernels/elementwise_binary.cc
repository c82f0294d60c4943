// CPU kernel factories of the elementwise family, binary half: arithmetic, Pow, Mod, BitShift, comparisons,
// logic, PRelu, Where and the variadic Sum/Mean/Max/Min. Broadcast plans are made once, when the plan is made.
#include "cpu_ops/elementwise_binary.h"

#include <type_traits>

#include "executor/kernel_registry.h"
#include "graph/tensor.h"

namespace ot {
namespace {

using cpu::BinaryOp;

bool IsTensorType(DataType t) { return t != DataType::kUndefined && t != DataType::kString && SizeOf(t) > 0; }

// Dims of input B as broadcast against A. Opset < 7 binary ops with broadcast=1 align B with A's dims starting at
// `axis` (default: trailing); the padded dims then broadcast numpy-style.
std::vector<int64_t> OperandBDims(const KernelContext& ctx, bool legacy_op) {
  const auto& a = ctx.in(0).dims;
  const auto& b = ctx.in(1).dims;
  if (!legacy_op || ctx.node.opset >= 7 || ctx.node.attr_int("broadcast", 0) == 0) return b;
  const int64_t ra = static_cast<int64_t>(a.size()), rb = static_cast<int64_t>(b.size());
  int64_t axis = ctx.node.has_attr("axis") ? ctx.node.attr_int("axis", 0) : ra - rb;
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra) ctx.Fail("broadcast axis does not fit B into A");
  std::vector<int64_t> d(static_cast<size_t>(ra), 1);
  for (int64_t i = 0; i < rb; ++i) d[axis + i] = b[i];
  return d;
}

cpu::BroadcastPlan Plan(const KernelContext& ctx, const std::vector<std::vector<int64_t>>& ins) {
  try {
    return cpu::MakeBroadcastPlan(ctx.out(0).dims, ins);
  } catch (const std::invalid_argument& e) {
    ctx.Fail(e.what());
  }
}

KernelInfo MakeBinary(const KernelContext& ctx, BinaryOp op, bool legacy_op) {
  const DataType t = ctx.in(0).dtype;
  if (!IsTensorType(t)) ctx.Unsupported("input type " + DataTypeName(t) + " is not supported");
  if (ctx.in(1).dtype != t)
    ctx.Fail("input types differ: " + DataTypeName(t) + " and " + DataTypeName(ctx.in(1).dtype));
  if (!cpu::BinarySupports(op, IsFloat(t), IsInteger(t), IsInteger(t) && !IsSigned(t), t == DataType::kBool))
    ctx.Unsupported("input type " + DataTypeName(t) + " is not supported");
  auto plan = Plan(ctx, {ctx.in(0).dims, OperandBDims(ctx, legacy_op)});
  return DispatchDType(t, [&](auto tag) -> KernelInfo {
    using T = decltype(tag);
    KernelInfo k{[op, plan](const KernelIO& io) { cpu::Binary<T>(op, io.In<T>(0), io.In<T>(1), io.out[0], plan); }};
    // An operand of the output's shape is read at the output's index (BinaryLoop, BinaryLoopHalf's tiles),
    // whatever the other operand broadcasts; comparisons write bool, which AllowInPlace's dtype check excludes.
    if (!legacy_op || ctx.in(1).dims == ctx.out(0).dims) {
      AllowInPlace(k, ctx, 0, 0);
      AllowInPlace(k, ctx, 0, 1);
    }
    return k;
  });
}

void RegBinary(KernelRegistry& r, const char* op_type, BinaryOp op, bool legacy_op) {
  r.Register(op_type, [op, legacy_op](const KernelContext& ctx) { return MakeBinary(ctx, op, legacy_op); });
}

template <typename T>
constexpr bool kPowBase = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, float16> ||
                          std::is_same_v<T, bfloat16> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

KernelInfo MakePow(const KernelContext& ctx) {
  const DataType t = ctx.in(0).dtype, e = ctx.in(1).dtype;
  if (!IsFloat(e) && !IsInteger(e)) ctx.Unsupported("exponent type " + DataTypeName(e) + " is not supported");
  auto plan = Plan(ctx, {ctx.in(0).dims, OperandBDims(ctx, true)});
  return DispatchDType(t, [&](auto tag) -> KernelInfo {
    using T = decltype(tag);
    if constexpr (!kPowBase<T>) {
      ctx.Unsupported("base type " + DataTypeName(t) + " is not supported");
    } else {
      return DispatchDType(e, [&](auto etag) -> KernelInfo {
        using E = decltype(etag);
        if constexpr (std::is_same_v<E, bool>) {
          ctx.Unsupported("bool exponent");
        } else {
          return KernelInfo{
              [plan](const KernelIO& io) { cpu::Pow<T, E>(io.In<T>(0), io.In<E>(1), io.Out<T>(0), plan); }};
        }
      });
    }
  });
}

// PRelu: slope broadcasts unidirectionally to X. Opset < 7: a 1-D slope with X's channel count (dim 1) applies
// along the channel axis, as PyTorch exported it.
KernelInfo MakePRelu(const KernelContext& ctx) {
  const auto& x = ctx.in(0).dims;
  std::vector<int64_t> s = ctx.in(1).dims;
  if (ctx.node.opset < 7 && s.size() == 1 && x.size() >= 2 && s[0] == x[1]) {
    s.assign(x.size() - 1, 1);
    s[0] = x[1];
  }
  if (ctx.in(1).dtype != ctx.in(0).dtype)
    ctx.Fail("slope type " + DataTypeName(ctx.in(1).dtype) + " differs from X " + DataTypeName(ctx.in(0).dtype));
  const DataType t = ctx.in(0).dtype;
  if (!IsFloat(t) && !IsInteger(t)) ctx.Unsupported("input type " + DataTypeName(t) + " is not supported");
  auto plan = Plan(ctx, {x, s});
  return DispatchDType(t, [&](auto tag) -> KernelInfo {
    using T = decltype(tag);
    return KernelInfo{
        [plan](const KernelIO& io) { cpu::Binary<T>(BinaryOp::kPRelu, io.In<T>(0), io.In<T>(1), io.out[0], plan); }};
  });
}

KernelInfo MakeWhere(const KernelContext& ctx) {
  ctx.RequireDType(0, {DataType::kBool});
  const DataType t = ctx.in(1).dtype;
  if (!IsTensorType(t)) ctx.Unsupported("input type " + DataTypeName(t) + " is not supported");
  if (ctx.in(2).dtype != t) ctx.Fail("X and Y types differ");
  auto plan = Plan(ctx, {ctx.in(0).dims, ctx.in(1).dims, ctx.in(2).dims});
  return DispatchDType(t, [&](auto tag) -> KernelInfo {
    using T = decltype(tag);
    return KernelInfo{
        [plan](const KernelIO& io) { cpu::Where<T>(io.In<bool>(0), io.In<T>(1), io.In<T>(2), io.Out<T>(0), plan); }};
  });
}

KernelInfo MakeVariadic(const KernelContext& ctx, cpu::VariadicOp op) {
  const int n = static_cast<int>(ctx.inputs.size());
  if (n == 0) ctx.Fail("needs at least one input");
  const DataType t = ctx.in(0).dtype;
  const bool float_only = op == cpu::VariadicOp::kSum || op == cpu::VariadicOp::kMean;
  if (!IsFloat(t) && (float_only || !IsInteger(t)))
    ctx.Unsupported("input type " + DataTypeName(t) + " is not supported");
  std::vector<std::vector<int64_t>> dims;
  for (int i = 0; i < n; ++i) {
    if (ctx.in(i).dtype != t) ctx.Fail("input types differ");
    dims.push_back(ctx.in(i).dims);
  }
  auto plan = Plan(ctx, dims);
  return DispatchDType(t, [&](auto tag) -> KernelInfo {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      ctx.Unsupported("bool inputs");
    } else {
      return KernelInfo{[op, plan, n](const KernelIO& io) {
        std::vector<const T*> ins(n);
        for (int i = 0; i < n; ++i) ins[i] = io.In<T>(i);
        cpu::Variadic<T>(op, ins, io.Out<T>(0), plan);
      }};
    }
  });
}

}  // namespace

void RegisterElementwiseBinaryKernels(KernelRegistry& r) {
  RegBinary(r, "Add", BinaryOp::kAdd, true);
  RegBinary(r, "Sub", BinaryOp::kSub, true);
  RegBinary(r, "Mul", BinaryOp::kMul, true);
  RegBinary(r, "Div", BinaryOp::kDiv, true);
  RegBinary(r, "Equal", BinaryOp::kEqual, true);
  RegBinary(r, "Less", BinaryOp::kLess, true);
  RegBinary(r, "Greater", BinaryOp::kGreater, true);
  RegBinary(r, "LessOrEqual", BinaryOp::kLessOrEqual, false);
  RegBinary(r, "GreaterOrEqual", BinaryOp::kGreaterOrEqual, false);
  RegBinary(r, "And", BinaryOp::kAnd, true);
  RegBinary(r, "Or", BinaryOp::kOr, true);
  RegBinary(r, "Xor", BinaryOp::kXor, true);
  r.Register("Mod", [](const KernelContext& ctx) {
    return MakeBinary(ctx, ctx.node.attr_int("fmod", 0) ? BinaryOp::kFmod : BinaryOp::kMod, false);
  });
  r.Register("BitShift", [](const KernelContext& ctx) {
    std::string dir = ctx.node.attr_string("direction", "");
    if (dir != "LEFT" && dir != "RIGHT") ctx.Fail("direction must be LEFT or RIGHT, got '" + dir + "'");
    return MakeBinary(ctx, dir == "LEFT" ? BinaryOp::kShiftLeft : BinaryOp::kShiftRight, false);
  });
  r.Register("Pow", MakePow);
  r.Register("PRelu", MakePRelu);
  r.Register("Where", MakeWhere);
  r.Register("Sum", [](const KernelContext& ctx) { return MakeVariadic(ctx, cpu::VariadicOp::kSum); });
  r.Register("Mean", [](const KernelContext& ctx) { return MakeVariadic(ctx, cpu::VariadicOp::kMean); });
  r.Register("Max", [](const KernelContext& ctx) { return MakeVariadic(ctx, cpu::VariadicOp::kMax); });
  r.Register("Min", [](const KernelContext& ctx) { return MakeVariadic(ctx, cpu::VariadicOp::kMin); });
}

}  // namespace ot
