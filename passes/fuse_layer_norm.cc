#include "passes/fuse_layer_norm.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "passes/fuse_util.h"

namespace ot {

namespace {

using namespace fuse;

// The axes a ReduceMean reduces, normalized to [0, rank) and sorted; nullopt when unknown, when keepdims != 1 or
// when they are empty (all axes, or none with noop_with_empty_axes).
std::optional<std::vector<int64_t>> ReduceAxes(const Node* n, int64_t rank) {
  if (!IsOp(n, "ReduceMean") || n->attr_int("keepdims", 1) != 1) return std::nullopt;
  std::vector<int64_t> axes;
  if (n->opset >= 18) {
    if (!n->has_input(1)) return std::nullopt;
    std::optional<Tensor> t = ConstantTensor(n->inputs[1]);
    if (!t) return std::nullopt;
    for (int64_t i = 0; i < t->numel(); ++i) axes.push_back(static_cast<int64_t>(t->GetDouble(i)));
  } else {
    axes = n->attr_ints("axes");
  }
  if (axes.empty()) return std::nullopt;
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return std::nullopt;
  return axes;
}

// A float value that can be LayerNormalization's Scale or B for x normalized over its last k axes.
bool Affine(const Value* v, const Value* x, int64_t k) {
  return v && v->dtype == x->dtype && v->shape.known_rank() && v->shape.rank() <= k;
}

struct Match {
  Value* x = nullptr;
  Value* scale = nullptr;
  Value* bias = nullptr;
  std::vector<Node*> nodes;  // the last one produces y
  int64_t k = 0;             // normalized over the last k axes
  float eps = 0;
};

// From d = Sub(x, mean).
bool MatchFromSub(const Graph& g, Node* sub, Match& m) {
  if (!IsOp(sub, "Sub") || sub->inputs.size() != 2) return false;
  Value* x = sub->inputs[0];
  Value* mean = sub->inputs[1];
  Node* rm = mean->producer;
  if (!IsOp(rm, "ReduceMean") || rm->inputs[0] != x || !Private(g, mean)) return false;
  if (!x->shape.known_rank() || !IsFloat(x->dtype)) return false;
  const int64_t rank = x->shape.rank();
  auto axes = ReduceAxes(rm, rank);
  if (!axes) return false;
  const int64_t k = static_cast<int64_t>(axes->size());
  for (int64_t i = 0; i < k; ++i)
    if ((*axes)[i] != rank - k + i) return false;  // the trailing axes only

  // d's consumers: the square and the Div, nothing else.
  Value* d = sub->outputs[0];
  if (std::find(g.outputs.begin(), g.outputs.end(), d) != g.outputs.end()) return false;
  Node* sq = nullptr;
  Node* div = nullptr;
  for (const Use& u : d->uses) {
    Node* n = u.node;
    if (IsOp(n, "Div") && u.input_index == 0 && !div)
      div = n;
    else if (IsOp(n, "Pow") && u.input_index == 0 && n->inputs.size() == 2 && Near(ScalarConstant(n->inputs[1]), 2.0) &&
             !sq)
      sq = n;
    else if (IsOp(n, "Mul") && n->inputs.size() == 2 && n->inputs[0] == d && n->inputs[1] == d && (!sq || sq == n))
      sq = n;
    else
      return false;
  }
  if (!sq || !div) return false;
  const size_t expected_uses = IsOp(sq, "Mul") ? 3 : 2;
  if (d->uses.size() != expected_uses) return false;

  Node* rv = OnlyUser(g, sq->outputs[0]);
  if (!rv || !IsOp(rv, "ReduceMean") || rv->inputs[0] != sq->outputs[0] || ReduceAxes(rv, rank) != axes) return false;
  Node* add = OnlyUser(g, rv->outputs[0]);
  if (!add || !IsOp(add, "Add")) return false;
  Value* epsv = Other(add, rv->outputs[0]);
  std::optional<double> eps = ScalarConstant(epsv);
  if (!eps || *eps < 0 || ConstantRank(epsv) > rank) return false;
  Node* sqrt = OnlyUser(g, add->outputs[0]);
  if (!sqrt || !IsOp(sqrt, "Sqrt")) return false;
  if (!Private(g, sqrt->outputs[0]) || div->inputs[1] != sqrt->outputs[0]) return false;

  m.x = x;
  m.k = k;
  m.eps = static_cast<float>(*eps);
  m.nodes = {rm, sub, sq, rv, add, sqrt, div};
  // Optional affine tail: Mul(y, scale) then Add(., bias), each only when y is private to it.
  Value* y = div->outputs[0];
  if (Node* mul = OnlyUser(g, y); mul && IsOp(mul, "Mul") && Affine(Other(mul, y), x, k)) {
    m.scale = Other(mul, y);
    m.nodes.push_back(mul);
    y = mul->outputs[0];
  }
  if (Node* ba = OnlyUser(g, y); ba && IsOp(ba, "Add") && Affine(Other(ba, y), x, k)) {
    m.bias = Other(ba, y);
    m.nodes.push_back(ba);
    y = ba->outputs[0];
  }
  return y->dtype == x->dtype;
}

}  // namespace

bool FuseLayerNormPass::Run(Graph& g) {
  fused_ = 0;
  InferShapes(g, /*strict=*/false);  // x's rank and dtype, the scale's shape
  const OpSchema* ln = OpRegistry::Global().Find("", "LayerNormalization");
  const int min_opset = ln ? ln->min_opset : 17;
  bool again = true;
  while (again) {  // restart after each rewrite: it deletes nodes
    again = false;
    for (const auto& up : g.nodes()) {
      Match m;
      if (!MatchFromSub(g, up.get(), m)) continue;
      Node* last = m.nodes.back();
      Value* y = last->outputs[0];
      Value* scale = m.scale;
      if (!scale) {
        // Ones over the normalized dims (static dims needed).
        std::vector<int64_t> nd;
        const auto& dims = m.x->shape.dims();
        for (size_t i = dims.size() - m.k; i < dims.size(); ++i) {
          if (!dims[i].is_static()) break;
          nd.push_back(dims[i].value);
        }
        if (static_cast<int64_t>(nd.size()) != m.k) continue;
        Tensor ones(m.x->dtype, nd);
        for (int64_t i = 0; i < ones.numel(); ++i) ones.SetDouble(i, 1.0);
        scale = g.AddValue(g.UniqueName(y->name + "_ln_scale"));
        Node* c = g.AddNode("Constant", {}, {scale}, g.UniqueName(y->name + "_ln_scale"));
        c->attrs["value"] = Attribute::TensorValue(std::move(ones));
        InferNode(*c);
      }
      const std::string scope = Scope(last->name);
      const bool onnx_op = last->opset >= min_opset;  // else the internal alias (see the header)
      const int opset = last->opset;
      std::vector<Value*> ins = {m.x, scale};
      if (m.bias) ins.push_back(m.bias);
      RemoveMatched(g, m.nodes);
      Node* n = g.AddNode("LayerNormalization", ins, {y},
                          scope.empty() ? g.UniqueName("LayerNormalization") : scope + "/LayerNormalization");
      n->domain = onnx_op ? "" : kInternalDomain;
      n->opset = onnx_op ? opset : 1;
      n->attrs["axis"] = Attribute::Int(-m.k);
      n->attrs["epsilon"] = Attribute::Float(m.eps);
      ++fused_;
      again = true;
      break;
    }
  }
  return fused_ > 0;
}

}  // namespace ot
