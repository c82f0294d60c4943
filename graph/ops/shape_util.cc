#include "graph/ops/shape_util.h"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>

#include "graph/error.h"
#include "graph/infer_util.h"

namespace ot::shape_ops {

OpSchema Schema(const std::string& op, int min_opset, InferFn infer, std::vector<int> value_inputs,
                bool reads_input_data) {
  OpSchema s;
  s.op_type = op;
  s.min_opset = min_opset;
  s.infer = std::move(infer);
  s.value_inputs = std::move(value_inputs);
  s.reads_input_data = reads_input_data;
  return s;
}

Tensor ConstantValue(const Node& n) {
  for (const char* k : {"value_string", "value_strings"})
    if (n.has_attr(k)) throw UnsupportedError(n.Describe() + ": string constants are not supported");
  if (n.has_attr("sparse_value")) throw UnsupportedError(n.Describe() + ": sparse_value is not supported");
  if (const Attribute* a = n.attr("value")) {
    if (a->kind != Attribute::Kind::kTensor || a->t.empty_tensor())
      throw UnsupportedError(n.Describe() + ": the value attribute is not a supported tensor");
    return a->t;
  }
  if (n.has_attr("value_float")) return Tensor::Scalar(n.attr_float("value_float", 0));
  if (n.has_attr("value_floats")) {
    std::vector<float> v = n.attr_floats("value_floats");
    return Tensor::FromFloat(v, {static_cast<int64_t>(v.size())});
  }
  if (n.has_attr("value_int")) return Tensor::FromInt64({n.attr_int("value_int", 0)}, {});
  if (n.has_attr("value_ints")) {
    std::vector<int64_t> v = n.attr_ints("value_ints");
    return Tensor::FromInt64(v, {static_cast<int64_t>(v.size())});
  }
  throw Error(n.Describe() + ": Constant has no value attribute");
}

std::pair<int, int> ShapeRange(const Node& n, int rank) {
  int64_t start = n.opset >= 15 ? n.attr_int("start", 0) : 0;
  int64_t end = n.opset >= 15 ? n.attr_int("end", rank) : rank;
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return {static_cast<int>(start), static_cast<int>(std::max(start, end))};
}

ValueOf ValuesOf(const InferContext& ctx) {
  // Integers the data propagation knows in full (a Slice's end from Shape -> Gather -> Add -> Div, as PyTorch
  // exports x.chunk(2, dim=1)) count as values: materialized once per call, kept alive with the function.
  auto made = std::make_shared<std::map<int, Tensor>>();
  return [&ctx, made](int i) -> const Tensor* {
    if (!ctx.has_input(i)) return nullptr;
    if (const Tensor* t = ctx.input_value(i)) return t;
    if (auto it = made->find(i); it != made->end()) return &it->second;
    const Value* v = ctx.node.inputs[static_cast<size_t>(i)];
    if (!v->shape.known_rank() || v->shape.rank() > 1 || !IsInteger(v->dtype)) return nullptr;
    const std::optional<DimsValue> d = ctx.input_dims_value(i);
    if (!d) return nullptr;
    std::vector<int64_t> ints;
    for (const DimOrInt& e : *d) {
      if (!e.known) return nullptr;
      ints.push_back(e.value);
    }
    if (v->shape.rank() == 0 && ints.size() != 1) return nullptr;
    std::vector<int64_t> dims;
    if (v->shape.rank() == 1) dims.push_back(static_cast<int64_t>(ints.size()));
    return &made->emplace(i, Tensor::FromInt64(ints, dims)).first->second;
  };
}

IntsArg ReadInts(const Node& n, const std::string& attr, int input, int input_from, const ValueOf& val) {
  IntsArg a;
  if (n.opset < input_from) {
    if (n.has_attr(attr)) {
      a.present = a.known = true;
      a.v = n.attr_ints(attr);
    }
    return a;
  }
  if (!n.has_input(input)) return a;
  a.present = true;
  if (const Tensor* t = val(input)) {
    a.known = true;
    a.v = t->ToInt64Vector();
  }
  return a;
}

Dim ProductDim(const std::vector<Dim>& dims, int begin, int end) {
  int64_t p = 1;
  const Dim* sym = nullptr;
  int non_static = 0;
  for (int i = begin; i < end; ++i) {
    if (dims[i].is_static()) {
      p *= dims[i].value;
    } else {
      ++non_static;
      sym = &dims[i];
    }
  }
  if (non_static == 0) return Dim(p);
  if (p == 0) return Dim(0);
  if (non_static == 1 && p == 1) return *sym;
  return Dim();
}

Dim MulDim(const Dim& d, int64_t k) {
  if (d.is_static()) return Dim(d.value * k);
  if (k == 1) return d;
  if (k == 0) return Dim(0);
  return Dim();
}

Dim MergeDim(const Dim& a, const Dim& b) {
  if (a.is_static()) return a;
  if (b.is_static()) return b;
  return a.symbol.empty() ? b : a;
}

SliceAxis NormalizeSlice(int64_t dim, int64_t start, int64_t end, int64_t step) {
  SliceAxis s;
  s.step = step;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    s.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, std::max<int64_t>(dim - 1, 0));
    end = std::clamp<int64_t>(end, -1, dim - 1);
    s.count = start > end && dim > 0 ? (start - end - 1) / -step + 1 : 0;
  }
  s.start = s.count > 0 ? start : 0;
  return s;
}

namespace {
// starts/ends/axes/steps given (attributes or inputs); normalises axes and checks lengths.
std::optional<SliceArgs> FinishSliceArgs(const Node& n, SliceArgs a, bool has_axes, std::vector<int64_t> axes,
                                         int rank) {
  const size_t k = a.starts.size();
  if (a.ends.size() != k) throw Error(n.Describe() + ": starts and ends have different lengths");
  if (!has_axes) {
    axes.resize(k);
    for (size_t i = 0; i < k; ++i) axes[i] = static_cast<int64_t>(i);
  }
  if (axes.size() != k) throw Error(n.Describe() + ": axes and starts have different lengths");
  if (a.steps.empty()) a.steps.assign(k, 1);
  if (a.steps.size() != k) throw Error(n.Describe() + ": steps and starts have different lengths");
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < k; ++i) {
    int ax = NormalizeAxis(axes[i], rank, n.Describe());
    if (seen[ax]) throw Error(n.Describe() + ": axis " + std::to_string(axes[i]) + " is repeated");
    seen[ax] = true;
    a.axes.push_back(ax);
    if (a.steps[i] == 0) throw Error(n.Describe() + ": slice step is 0");
  }
  return a;
}
}  // namespace

std::optional<SliceArgs> ReadSliceArgs(const Node& n, const ValueOf& val, int rank) {
  if (n.opset >= 10) return ReadSliceInputs(n, val, rank, 1);
  SliceArgs a;
  a.starts = n.attr_ints("starts");
  a.ends = n.attr_ints("ends");
  return FinishSliceArgs(n, std::move(a), n.has_attr("axes"), n.attr_ints("axes"), rank);
}

std::optional<SliceArgs> ReadSliceInputs(const Node& n, const ValueOf& val, int rank, int first) {
  if (!n.has_input(first) || !n.has_input(first + 1))
    throw Error(n.Describe() + ": starts and ends inputs are required");
  for (int i = first; i <= first + 3; ++i)
    if (n.has_input(i) && !val(i)) return std::nullopt;
  SliceArgs a;
  a.starts = val(first)->ToInt64Vector();
  a.ends = val(first + 1)->ToInt64Vector();
  std::vector<int64_t> axes;
  const bool has_axes = n.has_input(first + 2);
  if (has_axes) axes = val(first + 2)->ToInt64Vector();
  if (n.has_input(first + 3)) a.steps = val(first + 3)->ToInt64Vector();
  return FinishSliceArgs(n, std::move(a), has_axes, std::move(axes), rank);
}

std::optional<PadArgs> ReadPadArgs(const Node& n, const ValueOf& val, int rank) {
  PadArgs p;
  p.mode = n.attr_string("mode", "constant");
  std::vector<int64_t> pads, axes;
  bool has_axes = false;
  if (n.opset < 11) {
    pads = n.opset < 2 ? n.attr_ints("paddings") : n.attr_ints("pads");
  } else {
    if (!n.has_input(1)) throw Error(n.Describe() + ": the pads input is required");
    if (!val(1)) return std::nullopt;
    pads = val(1)->ToInt64Vector();
    if (n.has_input(3)) {
      if (!val(3)) return std::nullopt;
      has_axes = true;
      axes = val(3)->ToInt64Vector();
    }
  }
  if (!has_axes) {
    axes.resize(rank);
    for (int i = 0; i < rank; ++i) axes[i] = i;
  }
  if (pads.size() != 2 * axes.size())
    throw Error(n.Describe() + ": pads has " + std::to_string(pads.size()) + " values, expected " +
                std::to_string(2 * axes.size()));
  p.begin.assign(rank, 0);
  p.end.assign(rank, 0);
  const size_t k = axes.size();
  for (size_t i = 0; i < k; ++i) {
    int ax = NormalizeAxis(axes[i], rank, n.Describe());
    p.begin[ax] = pads[i];
    p.end[ax] = pads[k + i];
  }
  return p;
}

std::optional<std::vector<int64_t>> ReadSplitSizes(const Node& n, const ValueOf& val, int64_t dim, int outputs) {
  IntsArg split = ReadInts(n, "split", 1, 13, val);
  if (split.present) {
    if (!split.known) return std::nullopt;
    int64_t sum = 0;
    for (int64_t s : split.v) {
      if (s < 0) throw Error(n.Describe() + ": split sizes must be non-negative");
      sum += s;
    }
    if (static_cast<int>(split.v.size()) != outputs)
      throw Error(n.Describe() + ": split has " + std::to_string(split.v.size()) + " parts but the node has " +
                  std::to_string(outputs) + " outputs");
    if (sum != dim)
      throw Error(n.Describe() + ": split sizes sum to " + std::to_string(sum) + ", the axis has " +
                  std::to_string(dim));
    return split.v;
  }
  if (outputs <= 0) throw Error(n.Describe() + ": Split has no outputs");
  if (n.opset >= 18 && n.has_attr("num_outputs")) {
    int64_t num = n.attr_int("num_outputs", outputs);
    if (num != outputs)
      throw Error(n.Describe() + ": num_outputs is " + std::to_string(num) + " but the node has " +
                  std::to_string(outputs) + " outputs");
    const int64_t chunk = (dim + num - 1) / num;
    std::vector<int64_t> sizes(num, chunk);
    sizes.back() = dim - chunk * (num - 1);
    if (sizes.back() < 0)
      throw Error(n.Describe() + ": axis of size " + std::to_string(dim) + " cannot be split into " +
                  std::to_string(num) + " parts");
    return sizes;
  }
  if (dim % outputs != 0)
    throw Error(n.Describe() + ": axis of size " + std::to_string(dim) + " does not split into " +
                std::to_string(outputs) + " equal parts");
  return std::vector<int64_t>(outputs, dim / outputs);
}

}  // namespace ot::shape_ops
