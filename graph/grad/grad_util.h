// Small helpers shared by the gradient rules of activation_grad.cc, index_grad.cc, einsum_grad.cc and
// conv_transpose_grad.cc: constant inputs as integers, static dims, and ops emitted in the form of the forward
// node's opset (axes/pads/starts as inputs from the opset that made them inputs, attributes before).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "graph/grad_context.h"
#include "graph/infer_util.h"

namespace ot::grad {

// The value of v when it is a constant (initializer or Constant node), as int64s.
inline std::optional<std::vector<int64_t>> ConstInts(const Value* v) {
  if (!v) return std::nullopt;
  if (v->initializer) return v->initializer->ToInt64Vector();
  if (v->producer && v->producer->op_type == "Constant" && v->producer->domain.empty()) {
    const Attribute* a = v->producer->attr("value");
    if (a && a->kind == Attribute::Kind::kTensor) return a->t.ToInt64Vector();
    if ((a = v->producer->attr("value_ints"))) return a->ints;
    if ((a = v->producer->attr("value_int"))) return std::vector<int64_t>{a->i};
  }
  return std::nullopt;
}

// The value of a scalar constant as a double.
inline std::optional<double> ConstDouble(const Value* v) {
  if (!v) return std::nullopt;
  const Tensor* t = nullptr;
  if (v->initializer) t = v->initializer.get();
  else if (v->producer && v->producer->op_type == "Constant" && v->producer->attr("value"))
    t = &v->producer->attr("value")->t;
  if (!t || t->numel() != 1) return std::nullopt;
  return t->GetDouble(0);
}

inline std::vector<int64_t> StaticDims(const GradContext& c, const Value* v, const std::string& what) {
  if (!v->shape.known_rank() || !v->shape.is_static()) c.Fail(what + "'s shape must be static");
  std::vector<int64_t> d;
  for (int i = 0; i < v->shape.rank(); ++i) d.push_back(v->shape[i].value);
  return d;
}

inline int Rank(const GradContext& c, const Value* v, const std::string& what) {
  if (!v->shape.known_rank()) c.Fail(what + "'s rank must be known");
  return v->shape.rank();
}

inline Value* CastLike(GradContext& c, Value* v, const Value* like) {
  return c.Op("Cast", {v}, {{"to", Attribute::Int(static_cast<int64_t>(like->dtype))}});
}

// ReduceSum(v, axes) {keepdims}; axes as an input from opset 13.
inline Value* ReduceSumAxes(GradContext& c, Value* v, const std::vector<int64_t>& axes, bool keepdims) {
  const auto kd = Attribute::Int(keepdims ? 1 : 0);
  if (c.node().opset >= 13) return c.Op("ReduceSum", {v, c.Ints(axes)}, {{"keepdims", kd}});
  return c.Op("ReduceSum", {v}, {{"axes", Attribute::Ints(axes)}, {"keepdims", kd}});
}

// Unsqueeze(v, axes); axes as an input from opset 13.
inline Value* UnsqueezeAxes(GradContext& c, Value* v, const std::vector<int64_t>& axes) {
  if (c.node().opset >= 13) return c.Op("Unsqueeze", {v, c.Ints(axes)});
  return c.Op("Unsqueeze", {v}, {{"axes", Attribute::Ints(axes)}});
}

// Pad(v, pads) with zeros; pads as an input from opset 11.
inline Value* PadZeros(GradContext& c, Value* v, const std::vector<int64_t>& pads) {
  if (c.node().opset >= 11) return c.Op("Pad", {v, c.Ints(pads)});
  return c.Op("Pad", {v}, {{"pads", Attribute::Ints(pads)}});
}

// Zeros of `like`'s shape and dtype.
inline Value* ZerosLike(GradContext& c, const Value* like) {
  Tensor z(like->dtype, {1});
  return c.Op("ConstantOfShape", {c.Op("Shape", {const_cast<Value*>(like)})}, {{"value", Attribute::TensorValue(z)}});
}

}  // namespace ot::grad
