#include "passes/channels_last.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/op_registry.h"
#include "passes/fuse_util.h"

namespace ot {

namespace {

// NCHW axis -> its place in NHWC.
constexpr int64_t kToLast[4] = {0, 3, 1, 2};

bool Floatish(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16; }

bool Rank4(const Value* v) { return v && v->shape.known_rank() && v->shape.rank() == 4 && Floatish(v->dtype); }

Shape ToLastShape(const Shape& s) { return Shape({s[0], s[2], s[3], s[1]}); }

bool IsUnary(const Node* n) {
  static const std::set<std::string> kOps = {"Relu",      "Sigmoid",  "Tanh", "Clip", "HardSigmoid", "HardSwish",
                                             "LeakyRelu", "Elu",      "Selu", "Neg",  "Abs",         "Exp",
                                             "Softplus",  "Identity", "Gelu", "Erf",  "Sqrt",        "Dropout"};
  return (n->domain.empty() || n->domain == kInternalDomain) && kOps.count(n->op_type);
}

bool IsBroadcast(const Node* n) {
  static const std::set<std::string> kOps = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum"};
  return n->domain.empty() && kOps.count(n->op_type);
}

bool IsReduce(const Node* n) {
  return n->domain.empty() && (n->op_type == "ReduceMean" || n->op_type == "ReduceSum" || n->op_type == "ReduceMax");
}

// A constant operand (an initializer that is not a graph input).
const Tensor* ConstantOf(const Graph& g, const Value* v) {
  if (!v || !v->initializer) return nullptr;
  if (std::find(g.inputs.begin(), g.inputs.end(), v) != g.inputs.end()) return nullptr;
  return v->initializer.get();
}

// The elements of an integer value of rank <= 1 when all are known here (a constant, or data propagation through
// Shape -> Gather -> ... chains).
std::optional<std::vector<int64_t>> KnownInts(const Value* v) {
  if (!v) return std::nullopt;
  const std::optional<DimsValue> d = DimsValueOf(v);
  if (!d) return std::nullopt;
  std::vector<int64_t> r;
  for (const DimOrInt& e : *d) {
    if (!e.known) return std::nullopt;
    r.push_back(e.value);
  }
  return r;
}

// Slice (opset >= 10) axes given as an input that is known, normalized to rank 4; nullopt otherwise.
std::optional<std::vector<int64_t>> SliceAxes(const Node* n) {
  if (n->opset < 10 || !n->has_input(3)) return std::nullopt;
  std::optional<std::vector<int64_t>> axes = KnownInts(n->inputs[3]);
  if (!axes) return std::nullopt;
  for (int64_t& a : *axes) {
    if (a < -4 || a > 3) return std::nullopt;
    if (a < 0) a += 4;
  }
  return axes;
}

// The axes of a Reduce node (attribute, or constant input 1 from the opset that moved them there), normalized to
// rank 4; false when they are not known here.
bool ReduceAxes(const Graph& g, const Node* n, std::vector<int64_t>& axes, bool& from_input) {
  from_input = n->has_input(1);
  if (from_input) {
    const Tensor* t = ConstantOf(g, n->inputs[1]);
    if (!t) return false;
    axes = t->ToInt64Vector();
  } else {
    axes = n->attr_ints("axes");
  }
  if (axes.empty()) return !from_input && n->attr_int("noop_with_empty_axes", 0) == 0;  // every axis
  for (int64_t& a : axes) {
    if (a < -4 || a > 3) return false;
    if (a < 0) a += 4;
  }
  return true;
}

class Rewriter {
 public:
  explicit Rewriter(Graph& g) : g_(g) {}

  int converted = 0, transposes = 0;

  void Run() {
    std::vector<Node*> dropped;
    for (Node* n : g_.TopologicalOrder()) {
      if (Layout(n))
        ConvertLayout(n);
      else if (Agnostic(n))
        ConvertAgnostic(n);
      else if (ChannelShuffle(n) || GroupNormOneGroup(n) || ShapeOfLast(n))
        continue;
      else if (ModelToLast(n))
        dropped.push_back(n);
    }
    // The model's own Transposes back to NCHW whose readers now read the channels-last value (LastInput) are dead.
    for (const auto& n : g_.nodes())
      if (n->domain.empty() && n->op_type == "Transpose" && n->has_output(0) && n->outputs[0]->uses.empty() &&
          n->attr_ints("perm") == std::vector<int64_t>{0, 3, 1, 2} && !Pinned(n->outputs[0]) &&
          std::find(dropped.begin(), dropped.end(), n.get()) == dropped.end())
        dropped.push_back(n.get());
    g_.RemoveNodes(dropped);
    // Every channels-last value that an NCHW reader, a graph output or a state binding still names: its NCHW value,
    // kept under its name, from a Transpose back.
    for (auto& [nchw, last] : last_) {
      bool pinned = !nchw->uses.empty() || std::find(g_.outputs.begin(), g_.outputs.end(), nchw) != g_.outputs.end();
      for (const auto& b : g_.update_bindings) pinned |= b.next == nchw;
      if (!pinned) continue;
      Node* t = g_.AddNode("Transpose", {last}, {nchw}, g_.UniqueName("channels_last/to_nchw"));
      t->attrs["perm"] = Attribute::Ints({0, 3, 1, 2});
      ++transposes;
      InferNode(*t);
    }
  }

 private:
  // A graph output or a state's next value.
  bool Pinned(const Value* v) const {
    if (std::find(g_.outputs.begin(), g_.outputs.end(), v) != g_.outputs.end()) return true;
    for (const auto& b : g_.update_bindings)
      if (b.next == v) return true;
    return false;
  }

  // A layout op this pass gives channels_last = 1 (or, GlobalAveragePool, turns into ReduceMean).
  bool Layout(const Node* n) const {
    if (!n->domain.empty() || n->inputs.empty() || !Rank4(n->inputs[0]) || !n->has_output(0)) return false;
    const std::string& op = n->op_type;
    if (op == "Conv") return n->has_input(1) && n->attr_int("channels_last", 0) == 0;
    if (op == "BatchNormalization") return n->opset >= 9 && n->attr_int("channels_last", 0) == 0;
    if (op == "MaxPool") return !n->has_output(1) && n->attr_int("channels_last", 0) == 0;
    if (op == "AveragePool") return n->attr_int("channels_last", 0) == 0;
    if (op == "GlobalAveragePool") return last_.count(n->inputs[0]) != 0;  // only inside a region
    return false;
  }

  // A layout-agnostic op reading a channels-last value, whose every operand can follow.
  bool Agnostic(const Node* n) const {
    const bool unary = IsUnary(n), bc = IsBroadcast(n), concat = n->domain.empty() && n->op_type == "Concat",
               reduce = IsReduce(n), slice = n->domain.empty() && n->op_type == "Slice";
    if (!unary && !bc && !concat && !reduce && !slice) return false;
    bool any_last = false;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const Value* v = n->inputs[i];
      if (!v) continue;
      if (last_.count(const_cast<Value*>(v))) any_last = true;
    }
    if (!any_last) return false;
    if (reduce && n->attr_int("keepdims", 1) == 0) return ReduceToPlain(n);
    for (const Value* o : n->outputs)
      if (o && !Rank4(o)) return false;
    if (unary) {
      for (size_t i = 1; i < n->inputs.size(); ++i)  // Clip's bounds, Dropout's ratio: scalars
        if (n->inputs[i] && (!n->inputs[i]->shape.known_rank() || n->inputs[i]->shape.rank() > 0)) return false;
      return Rank4(n->inputs[0]);
    }
    if (concat) {
      int64_t axis = n->attr_int("axis", 1);
      if (axis < 0) axis += 4;
      if (axis != 1) return false;
      for (const Value* v : n->inputs)
        if (!Rank4(v)) return false;
      return true;
    }
    if (slice) return Rank4(n->inputs[0]) && last_.count(n->inputs[0]) && SliceAxes(n).has_value();
    if (reduce) {
      std::vector<int64_t> axes;
      bool from_input;
      return Rank4(n->inputs[0]) && n->attr_int("keepdims", 1) == 1 && ReduceAxes(g_, n, axes, from_input);
    }
    for (const Value* v : n->inputs) {  // broadcasting: rank-4 operands, scalars, or static shapes of rank < 4
      if (!v || Rank4(v)) continue;
      if (!v->shape.known_rank() || v->dtype != n->outputs[0]->dtype) return false;
      const auto count = v->shape.NumElements();
      if (count && *count == 1) continue;
      if (!v->shape.is_static() || v->shape.rank() > 4) return false;
    }
    return true;
  }

  // A Reduce without keepdims whose kept axes come out in the same order from NHWC (N, C of a mean over H, W:
  // ShuffleNet's x.mean([2, 3])): it reads the channels-last value and its output is an ordinary one.
  bool ReduceToPlain(const Node* n) const {
    std::vector<int64_t> axes;
    bool from_input;
    if (!Rank4(n->inputs[0]) || !ReduceAxes(g_, n, axes, from_input) || axes.empty()) return false;
    int64_t prev = -1;
    for (int64_t a = 0; a < 4; ++a) {
      if (std::find(axes.begin(), axes.end(), a) != axes.end()) continue;
      if (kToLast[a] < prev) return false;
      prev = kToLast[a];
    }
    return true;
  }

  // The single reader of v, when v has exactly one and is not pinned.
  Node* OnlyReader(const Value* v) const {
    if (!v || v->uses.size() != 1 || Pinned(v)) return nullptr;
    return v->uses[0].node;
  }

  // ShuffleNet's channel shuffle of a channels-last value x [N, C, H, W]: Reshape to [N, a, b, H, W] ->
  // Transpose(perm 0,2,1,3,4) -> Reshape back to x's shape. In NHWC the same permutation of the channels is
  // Reshape [N, H, W, a, b] -> Transpose(perm 0,1,2,4,3) -> Reshape [N, H, W, C]: the three nodes are rewritten so,
  // with constant targets (0 keeps the batch), and the result is channels-last.
  bool ChannelShuffle(Node* n) {
    if (!n->domain.empty() || n->op_type != "Reshape" || !n->has_input(0) || !n->has_input(1) || !n->has_output(0))
      return false;
    Value* x = n->inputs[0];
    if (!Rank4(x) || !last_.count(x)) return false;
    const Shape& xs = x->shape;
    const Shape& s5 = n->outputs[0]->shape;
    if (!xs[1].is_static() || !xs[2].is_static() || !xs[3].is_static() || !s5.known_rank() || s5.rank() != 5)
      return false;
    for (int i = 1; i < 5; ++i)
      if (!s5[i].is_static()) return false;
    if (!(s5[0] == xs[0]) || s5[3] != xs[2] || s5[4] != xs[3] || s5[1].value * s5[2].value != xs[1].value) return false;
    Node* t = OnlyReader(n->outputs[0]);
    if (!t || !t->domain.empty() || t->op_type != "Transpose" ||
        t->attr_ints("perm") != std::vector<int64_t>{0, 2, 1, 3, 4} || !t->has_output(0))
      return false;
    Node* back = OnlyReader(t->outputs[0]);
    if (!back || !back->domain.empty() || back->op_type != "Reshape" || back->inputs[0] != t->outputs[0] ||
        !back->has_output(0) || !(back->outputs[0]->shape == xs))
      return false;
    const int64_t a = s5[1].value, b = s5[2].value, h = xs[2].value, w = xs[3].value, c = xs[1].value;
    auto target = [&](std::vector<int64_t> d) {
      return g_.AddInitializer(g_.UniqueName("channels_last/shape"),
                               Tensor::FromInt64(d, {static_cast<int64_t>(d.size())}));
    };
    g_.SetInput(n, 0, LastInput(x));
    g_.SetInput(n, 1, target({0, h, w, a, b}));
    n->attrs["allowzero"] = Attribute::Int(0);
    InferNode(*n);
    t->attrs["perm"] = Attribute::Ints({0, 1, 2, 4, 3});
    InferNode(*t);
    g_.SetInput(back, 1, target({0, h, w, c}));
    back->attrs["allowzero"] = Attribute::Int(0);
    LastOutput(back, 0);
    InferNode(*back);
    converted += 3;
    return true;
  }

  // GroupNorm with one group as PyTorch exports it (PoolFormer's): Reshape x [N, C, H, W] to [N, 1, K] ->
  // InstanceNormalization over the K = C*H*W values of each image (scale and bias of one element) -> Reshape back to
  // x's shape. One group normalizes the whole image, whatever order its values are in: on a channels-last x the same
  // nodes read it, and the Reshape back takes the NHWC shape (a Shape of the channels-last value).
  bool GroupNormOneGroup(Node* n) {
    if (!n->domain.empty() || n->op_type != "Reshape" || !n->has_input(0) || !n->has_output(0)) return false;
    Value* x = n->inputs[0];
    if (!Rank4(x) || !last_.count(x)) return false;
    const Shape& s3 = n->outputs[0]->shape;
    if (!s3.known_rank() || s3.rank() != 3 || !s3[1].is_static() || s3[1].value != 1 || !(s3[0] == x->shape[0]))
      return false;
    Node* in = OnlyReader(n->outputs[0]);
    if (!in || !in->domain.empty() || in->op_type != "InstanceNormalization" || in->inputs[0] != n->outputs[0] ||
        !in->has_output(0))
      return false;
    Node* back = OnlyReader(in->outputs[0]);
    if (!back || !back->domain.empty() || back->op_type != "Reshape" || back->inputs[0] != in->outputs[0] ||
        !back->has_output(0) || !(back->outputs[0]->shape == x->shape))
      return false;
    Value* xl = LastInput(x);
    g_.SetInput(n, 0, xl);
    InferNode(*n);
    InferNode(*in);
    Value* dims = g_.AddValue(g_.UniqueName(xl->name + "_dims"));
    Node* shape = g_.AddNode("Shape", {xl}, {dims}, g_.UniqueName("channels_last/group_norm_shape"));
    InferNode(*shape);
    g_.SetInput(back, 1, dims);
    back->attrs["allowzero"] = Attribute::Int(0);
    LastOutput(back, 0);
    InferNode(*back);
    converted += 3;
    return true;
  }

  // Shape of a value that has a channels-last twin reads the twin, its dims gathered back to NCHW order, so the
  // NCHW value need not be made for it.
  bool ShapeOfLast(Node* n) {
    if (!n->domain.empty() || n->op_type != "Shape" || !n->has_input(0) || !n->has_output(0)) return false;
    auto it = last_.find(n->inputs[0]);
    if (it == last_.end() || !Rank4(n->inputs[0])) return false;
    int64_t start = n->opset >= 15 ? n->attr_int("start", 0) : 0, end = n->opset >= 15 ? n->attr_int("end", 4) : 4;
    if (start < 0) start += 4;
    if (end < 0) end += 4;
    start = std::clamp<int64_t>(start, 0, 4);
    end = std::clamp<int64_t>(end, start, 4);
    std::vector<int64_t> idx(kToLast + start, kToLast + end);
    Value* old = n->outputs[0];
    Value* dims = g_.AddValue(g_.UniqueName(old->name + "_nhwc"));
    n->outputs[0] = dims;
    dims->producer = n;
    dims->producer_output = 0;
    old->producer = nullptr;
    n->attrs.erase("start");
    n->attrs.erase("end");
    g_.SetInput(n, 0, it->second);
    InferNode(*n);
    Node* gather = g_.AddNode("Gather",
                              {dims, g_.AddInitializer(g_.UniqueName("channels_last/nchw_dims"),
                                                       Tensor::FromInt64(idx, {static_cast<int64_t>(idx.size())}))},
                              {old}, g_.UniqueName("channels_last/shape_nchw"));
    gather->attrs["axis"] = Attribute::Int(0);
    InferNode(*gather);
    return true;
  }

  // The model's own Transpose(perm 0,2,3,1) of a channels-last value (ConvNeXt's move to channels-last for its
  // LayerNorm and Linear layers) is that value: its readers read it directly and the node goes.
  bool ModelToLast(Node* n) {
    if (!n->domain.empty() || n->op_type != "Transpose" || !n->has_input(0) || !last_.count(n->inputs[0])) return false;
    if (n->attr_ints("perm") != std::vector<int64_t>{0, 2, 3, 1} || !n->has_output(0)) return false;
    Value* out = n->outputs[0];
    if (std::find(g_.outputs.begin(), g_.outputs.end(), out) != g_.outputs.end()) return false;
    for (const auto& b : g_.update_bindings)
      if (b.next == out) return false;
    g_.ReplaceAllUses(out, last_[n->inputs[0]]);
    ++converted;
    return true;
  }

  // Input i of n as channels-last: its channels-last value, the input of the model's own Transpose(perm 0,3,1,2)
  // that made it (the way back from the model's channels-last layers), or a Transpose of it (one per value).
  Value* LastInput(Value* v) {
    if (auto it = last_.find(v); it != last_.end()) return it->second;
    if (auto it = transposed_.find(v); it != transposed_.end()) return it->second;
    if (const Node* p = v->producer; p && p->domain.empty() && p->op_type == "Transpose" && p->has_input(0) &&
                                     p->attr_ints("perm") == std::vector<int64_t>{0, 3, 1, 2})
      return p->inputs[0];
    Value* t = g_.AddValue(g_.UniqueName(v->name + "_nhwc"));
    Node* n = g_.AddNode("Transpose", {v}, {t}, g_.UniqueName("channels_last/to_nhwc"));
    n->attrs["perm"] = Attribute::Ints({0, 2, 3, 1});
    InferNode(*n);
    ++transposes;
    transposed_[v] = t;
    return t;
  }

  // Output k of n becomes a new channels-last value; the old one is kept for NCHW readers (Run's Transposes back).
  void LastOutput(Node* n, int k) {
    Value* old = n->outputs[static_cast<size_t>(k)];
    Value* v = g_.AddValue(g_.UniqueName(old->name + "_nhwc"));
    v->dtype = old->dtype;
    v->shape = ToLastShape(old->shape);
    n->outputs[static_cast<size_t>(k)] = v;
    v->producer = n;
    v->producer_output = k;
    old->producer = nullptr;
    last_[old] = v;
  }

  void ConvertLayout(Node* n) {
    g_.SetInput(n, 0, LastInput(n->inputs[0]));
    if (n->op_type == "GlobalAveragePool") {
      n->op_type = "ReduceMean";
      n->attrs["keepdims"] = Attribute::Int(1);
      const std::vector<int64_t> axes = {1, 2};
      if (g_.OpsetOf("") >= 18) {
        n->inputs.resize(2, nullptr);
        g_.SetInput(n, 1, g_.AddInitializer(g_.UniqueName("channels_last/hw"), Tensor::FromInt64(axes, {2})));
      } else {
        n->attrs["axes"] = Attribute::Ints(axes);
      }
    } else {
      n->attrs["channels_last"] = Attribute::Int(1);
    }
    LastOutput(n, 0);
    InferNode(*n);
    ++converted;
  }

  void ConvertAgnostic(Node* n) {
    if (IsReduce(n)) {
      std::vector<int64_t> axes;
      bool from_input;
      ReduceAxes(g_, n, axes, from_input);
      for (int64_t& a : axes) a = kToLast[a];
      std::sort(axes.begin(), axes.end());
      if (from_input)
        g_.SetInput(n, 1,
                    g_.AddInitializer(g_.UniqueName("channels_last/axes"),
                                      Tensor::FromInt64(axes, {static_cast<int64_t>(axes.size())})));
      else if (!axes.empty())
        n->attrs["axes"] = Attribute::Ints(axes);
      g_.SetInput(n, 0, LastInput(n->inputs[0]));
      if (n->attr_int("keepdims", 1) == 0) {  // ReduceToPlain: the output keeps its value and layout
        InferNode(*n);
        ++converted;
        return;
      }
    } else if (n->op_type == "Slice") {  // starts, ends and steps stay; the axes move to where NHWC has them
      std::vector<int64_t> axes = *SliceAxes(n);
      for (int64_t& a : axes) a = kToLast[a];
      g_.SetInput(n, 3,
                  g_.AddInitializer(g_.UniqueName("channels_last/slice_axes"),
                                    Tensor::FromInt64(axes, {static_cast<int64_t>(axes.size())})));
      g_.SetInput(n, 0, LastInput(n->inputs[0]));
    } else if (n->op_type == "Concat") {
      n->attrs["axis"] = Attribute::Int(3);
      for (size_t i = 0; i < n->inputs.size(); ++i) g_.SetInput(n, static_cast<int>(i), LastInput(n->inputs[i]));
    } else {
      for (size_t i = 0; i < n->inputs.size(); ++i) {
        Value* v = n->inputs[i];
        if (!v) continue;
        if (Rank4(v)) {
          g_.SetInput(n, static_cast<int>(i), LastInput(v));
        } else if (const auto count = v->shape.NumElements(); count && *count > 1) {
          // A lower-rank operand (a per-channel [C, 1, 1] parameter): padded to rank 4 by a Reshape, then transposed
          // like any other, so a trained parameter keeps its name and shape (and gets its gradient through both).
          std::vector<int64_t> d = v->shape.StaticDims();
          d.insert(d.begin(), 4 - d.size(), 1);
          Value* r4 = g_.AddValue(g_.UniqueName(v->name + "_4d"));
          Node* rs = g_.AddNode("Reshape",
                                {v, g_.AddInitializer(g_.UniqueName("channels_last/shape"), Tensor::FromInt64(d, {4}))},
                                {r4}, g_.UniqueName("channels_last/to_4d"));
          InferNode(*rs);
          g_.SetInput(n, static_cast<int>(i), LastInput(r4));
        }
      }
    }
    for (size_t k = 0; k < n->outputs.size(); ++k)
      if (n->outputs[k]) LastOutput(n, static_cast<int>(k));
    InferNode(*n);
    ++converted;
  }

  Graph& g_;
  std::unordered_map<Value*, Value*> last_;        // NCHW value -> its channels-last value
  std::unordered_map<Value*, Value*> transposed_;  // NCHW value -> Transpose(it) to channels-last
};

}  // namespace

bool ChannelsLastPass::Run(Graph& g) {
  converted_ = transposes_ = 0;
  bool conv = false;
  for (const auto& n : g.nodes())
    conv |= n->domain.empty() && n->op_type == "Conv" && !n->inputs.empty() && Rank4(n->inputs[0]);
  if (!conv) return false;
  Rewriter r(g);
  r.Run();
  converted_ = r.converted;
  transposes_ = r.transposes;
  return converted_ > 0;
}

}  // namespace ot
