// Data propagation of every op that moves or computes sizes, as a table (graph/op_registry.h: DimsValueFn): the
// elements of its int64 output of rank <= 1 from its inputs' elements. Exporters build a Reshape's target from
// the input's own shape (PyTorch's x.view(B, T, heads, -1) becomes Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape); following the chain keeps `batch` named through the Reshape, where the values alone give "?".
//   Shape            the input's dims over [start, end)
//   Gather           axis 0 of a 1-D value at known indices (negative ones counted from the end)
//   Unsqueeze, Squeeze, Identity, Cast to an integer type: the elements unchanged (rank 0 <-> 1)
//   Concat           the inputs' elements in order
//   Slice            known starts/ends/axes/steps over a 1-D value
//   Add, Sub, Mul, Div  elementwise (one side may have one element): known integers computed (Div only of
//                    non-negative ones, where truncation and floor agree), x * 1, x / 1, x + 0, x - 0 keep x's
//                    size; anything else an unknown element
// A symbolic element is a size read by Shape: the rules treat it as positive (a zero-sized batch, for which a
// Reshape's 0 would mean "copy", is not one that inference names).
#include <algorithm>

#include "graph/op_registry.h"
#include "graph/ops/register_all.h"
#include "graph/ops/shape_util.h"

namespace ot {

namespace {

using Dv = std::optional<DimsValue>;

Dv SameAsInput0(const Node&, const DimsValueOfInput& in) { return in(0); }

Dv ShapeRule(const Node& n, const DimsValueOfInput&) {
  const Value* x = n.inputs.empty() ? nullptr : n.inputs[0];
  if (!x || !x->shape.known_rank()) return std::nullopt;
  auto [s, e] = shape_ops::ShapeRange(n, x->shape.rank());
  DimsValue out;
  for (int i = s; i < e; ++i) out.push_back(DimOrInt::Size(x->shape[i]));
  return out;
}

// Known integers of input i, or nullopt.
std::optional<std::vector<int64_t>> KnownInts(const DimsValueOfInput& in, int i) {
  Dv d = in(i);
  if (!d) return std::nullopt;
  std::vector<int64_t> v;
  for (const DimOrInt& e : *d) {
    if (!e.known) return std::nullopt;
    v.push_back(e.value);
  }
  return v;
}

Dv GatherRule(const Node& n, const DimsValueOfInput& in) {
  if (n.attr_int("axis", 0) != 0) return std::nullopt;
  const Value* data = n.inputs.size() > 0 ? n.inputs[0] : nullptr;
  if (!data || !data->shape.known_rank() || data->shape.rank() != 1) return std::nullopt;
  Dv d = in(0);
  std::optional<std::vector<int64_t>> idx = KnownInts(in, 1);
  if (!d || !idx) return std::nullopt;
  const int64_t size = static_cast<int64_t>(d->size());
  DimsValue out;
  for (int64_t i : *idx) {
    const int64_t k = i < 0 ? i + size : i;
    if (k < 0 || k >= size) return std::nullopt;  // inference of the Gather itself reports the bad index
    out.push_back((*d)[k]);
  }
  return out;
}

Dv CastRule(const Node& n, const DimsValueOfInput& in) {
  const auto to = static_cast<DataType>(n.attr_int("to", 0));
  if (to != DataType::kInt64 && to != DataType::kInt32) return std::nullopt;
  return in(0);
}

Dv ConcatRule(const Node& n, const DimsValueOfInput& in) {
  const int64_t axis = n.attr_int("axis", 0);
  if (axis != 0 && axis != -1) return std::nullopt;
  DimsValue out;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    Dv d = in(static_cast<int>(i));
    if (!d) return std::nullopt;
    out.insert(out.end(), d->begin(), d->end());
  }
  return out;
}

Dv SliceRule(const Node& n, const DimsValueOfInput& in) {
  Dv d = in(0);
  if (!d) return std::nullopt;
  std::vector<Tensor> args(5);
  std::vector<bool> have(5, false);
  for (int i = 1; i < 5 && i < static_cast<int>(n.inputs.size()); ++i) {
    if (!n.inputs[i]) continue;
    std::optional<std::vector<int64_t>> v = KnownInts(in, i);
    if (!v) return std::nullopt;
    args[i] = Tensor::FromInt64(*v, {static_cast<int64_t>(v->size())});
    have[i] = true;
  }
  std::optional<shape_ops::SliceArgs> a;
  try {
    a = shape_ops::ReadSliceArgs(
        n, [&](int i) -> const Tensor* { return i < 5 && have[i] ? &args[i] : nullptr; }, 1);
  } catch (const std::exception&) {
    return std::nullopt;  // inference of the Slice itself reports bad arguments
  }
  if (!a || a->axes.size() != 1) return std::nullopt;
  const shape_ops::SliceAxis s =
      shape_ops::NormalizeSlice(static_cast<int64_t>(d->size()), a->starts[0], a->ends[0], a->steps[0]);
  DimsValue out;
  for (int64_t k = 0; k < s.count; ++k) out.push_back((*d)[s.start + k * s.step]);
  return out;
}

enum class Arith { kAdd, kSub, kMul, kDiv };

DimOrInt Combine(Arith op, const DimOrInt& a, const DimOrInt& b) {
  if (a.known && b.known) {
    switch (op) {
      case Arith::kAdd:
        return DimOrInt::Int(a.value + b.value);
      case Arith::kSub:
        return DimOrInt::Int(a.value - b.value);
      case Arith::kMul:
        return DimOrInt::Int(a.value * b.value);
      case Arith::kDiv:
        if (a.value >= 0 && b.value > 0) return DimOrInt::Int(a.value / b.value);
        return DimOrInt{};
    }
  }
  // An identity element on one side keeps the other's size.
  const bool b1 = b.known && b.value == 1, b0 = b.known && b.value == 0;
  if ((op == Arith::kMul || op == Arith::kDiv) && b1) return a;
  if ((op == Arith::kAdd || op == Arith::kSub) && b0) return a;
  if ((op == Arith::kMul && a.known && a.value == 1) || (op == Arith::kAdd && a.known && a.value == 0)) return b;
  return DimOrInt{};
}

DimsValueFn ArithRule(Arith op) {
  return [op](const Node&, const DimsValueOfInput& in) -> Dv {
    Dv a = in(0), b = in(1);
    if (!a || !b || a->empty() || b->empty()) return std::nullopt;
    if (a->size() != b->size() && a->size() != 1 && b->size() != 1) return std::nullopt;
    const size_t n = std::max(a->size(), b->size());
    DimsValue out;
    for (size_t i = 0; i < n; ++i)
      out.push_back(Combine(op, (*a)[a->size() == 1 ? 0 : i], (*b)[b->size() == 1 ? 0 : i]));
    return out;
  };
}

}  // namespace

void RegisterDimsValues(OpRegistry& r) {
  r.SetDimsValue("", "Shape", ShapeRule);
  r.SetDimsValue("", "Gather", GatherRule);
  for (const char* op : {"Unsqueeze", "Squeeze", "Identity"}) r.SetDimsValue("", op, SameAsInput0);
  r.SetDimsValue("", "Cast", CastRule);
  r.SetDimsValue("", "Concat", ConcatRule);
  r.SetDimsValue("", "Slice", SliceRule);
  r.SetDimsValue("", "Add", ArithRule(Arith::kAdd));
  r.SetDimsValue("", "Sub", ArithRule(Arith::kSub));
  r.SetDimsValue("", "Mul", ArithRule(Arith::kMul));
  r.SetDimsValue("", "Div", ArithRule(Arith::kDiv));
}

}  // namespace ot
