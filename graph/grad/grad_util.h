// Small helpers shared by the gradient rules: constant inputs as integers, sizes read in the step graph where they
// are not static (SizeElem), the axes of Reduce* nodes, and ops emitted in the form of the forward
// node's opset (axes/pads/starts as inputs from the opset that made them inputs, attributes before).
#pragma once
#include <algorithm>
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
  if (v->initializer)
    t = v->initializer.get();
  else if (v->producer && v->producer->op_type == "Constant" && v->producer->attr("value"))
    t = &v->producer->attr("value")->t;
  if (!t || t->numel() != 1) return std::nullopt;
  return t->GetDouble(0);
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

// Squeeze(v, axes); axes as an input from opset 13.
inline Value* SqueezeAxes(GradContext& c, Value* v, const std::vector<int64_t>& axes) {
  if (c.node().opset >= 13) return c.Op("Squeeze", {v, c.Ints(axes)});
  return c.Op("Squeeze", {v}, {{"axes", Attribute::Ints(axes)}});
}

// Pad(v, pads) with zeros; pads as an input from opset 11.
inline Value* PadZeros(GradContext& c, Value* v, const std::vector<int64_t>& pads) {
  if (c.node().opset >= 11) return c.Op("Pad", {v, c.Ints(pads)});
  return c.Op("Pad", {v}, {{"pads", Attribute::Ints(pads)}});
}

// One element of a size vector a rule builds: known now (k), or computed in the step graph (v, int64 of shape [1]:
// a Shape of the forward input and arithmetic on it, which the plan folds for each concrete shape).
struct SizeElem {
  std::optional<int64_t> k;
  Value* v = nullptr;
};

// Dim `axis` of x: static, else Gather(Shape(x), [axis]).
inline SizeElem DimOf(GradContext& c, Value* x, int axis) {
  if (x->shape.known_rank() && x->shape[axis].is_static()) return {x->shape[axis].value, nullptr};
  return {std::nullopt, c.Op("Gather", {c.Op("Shape", {x}), c.Ints({axis})})};
}

inline Value* ValueOf(GradContext& c, const SizeElem& e) { return e.k ? c.Ints({*e.k}) : e.v; }

// a op b for op Add, Sub, Mul, Div (non-negative sizes: truncation is floor) or Max.
inline SizeElem Arith(GradContext& c, const char* op, const SizeElem& a, const SizeElem& b) {
  if (a.k && b.k) {
    const std::string o = op;
    return {o == "Add"   ? *a.k + *b.k
            : o == "Sub" ? *a.k - *b.k
            : o == "Mul" ? *a.k * *b.k
            : o == "Max" ? std::max(*a.k, *b.k)
                         : *a.k / *b.k,
            nullptr};
  }
  return {std::nullopt, c.Op(op, {ValueOf(c, a), ValueOf(c, b)})};
}

// The elements as one 1-D int64 value: a constant when all are known, else their Concat.
inline Value* SizesValue(GradContext& c, const std::vector<SizeElem>& elems) {
  std::vector<int64_t> known;
  for (const SizeElem& e : elems)
    if (e.k) known.push_back(*e.k);
  if (known.size() == elems.size()) return c.Ints(known);
  std::vector<Value*> parts;
  for (const SizeElem& e : elems) parts.push_back(ValueOf(c, e));
  return c.Op("Concat", parts, {{"axis", Attribute::Int(0)}});
}

// The axes a Reduce* node reduces: constants (`k`, normalised; all axes when none are given; empty for
// noop_with_empty_axes with none), or the node's own axes input (`v`) where it is computed in the step graph.
// Axes are an input of ReduceSum from opset 13 and of the other Reduce* ops from opset 18.
struct ReduceAxes {
  std::vector<int64_t> k;
  Value* v = nullptr;
};

inline ReduceAxes ReducedAxesOf(GradContext& c, int rank) {
  const Node& n = c.node();
  ReduceAxes r;
  const bool axes_input = n.opset >= (n.op_type == "ReduceSum" ? 13 : 18);
  if (axes_input) {
    if (n.has_input(1)) {
      auto a = ConstInts(n.inputs[1]);
      if (!a) {
        if (n.attr_int("noop_with_empty_axes", 0))
          c.Fail("axes computed in the graph with noop_with_empty_axes = 1 (empty axes would make it the identity)");
        r.v = n.inputs[1];
        return r;
      }
      r.k = *a;
    }
  } else {
    r.k = n.attr_ints("axes");
  }
  if (r.k.empty()) {
    if (axes_input && n.attr_int("noop_with_empty_axes", 0)) return r;
    for (int i = 0; i < rank; ++i) r.k.push_back(i);
  }
  for (int64_t& a : r.k) a = NormalizeAxis(a, rank, n.Describe());
  return r;
}

// Unsqueeze(v) at the reduced axes (Reduce* with keepdims = 0 undone).
inline Value* UnsqueezeAxes(GradContext& c, Value* v, const ReduceAxes& a) {
  return a.v ? c.Op("Unsqueeze", {v, a.v}) : UnsqueezeAxes(c, v, a.k);
}

inline Value* ReduceSumAxes(GradContext& c, Value* v, const ReduceAxes& a, bool keepdims) {
  if (!a.v) return ReduceSumAxes(c, v, a.k, keepdims);
  return c.Op("ReduceSum", {v, a.v}, {{"keepdims", Attribute::Int(keepdims ? 1 : 0)}});
}

// An axes input of the ReduceProd/ReduceMax... emitted by a rule of an opset-18 node.
inline Value* AxesValue(GradContext& c, const ReduceAxes& a) { return a.v ? a.v : c.Ints(a.k); }

// Zeros of `like`'s shape and dtype.
inline Value* ZerosLike(GradContext& c, const Value* like) {
  Tensor z(like->dtype, {1});
  return c.Op("ConstantOfShape", {c.Op("Shape", {const_cast<Value*>(like)})}, {{"value", Attribute::TensorValue(z)}});
}

}  // namespace ot::grad
