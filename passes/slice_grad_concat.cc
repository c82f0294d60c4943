#include "passes/slice_grad_concat.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "graph/op_registry.h"
#include "passes/fuse_util.h"

namespace ot {

namespace {

using namespace fuse;

// One SliceGrad term of a Sum: where its piece lies along the axis.
struct Piece {
  Node* node = nullptr;
  int axis = 0;
  int64_t start = 0, end = 0;
};

// X of a SliceGrad's shape input when it is Shape(X) (whole, no start/end attributes), else the value itself.
const Value* ShapeSource(const Value* shape) {
  const Node* p = shape->producer;
  if (IsOp(p, "Shape") && p->has_input(0) && !p->has_attr("start") && !p->has_attr("end")) return p->inputs[0];
  return shape;
}

// A one-element integer known before the step runs: a constant, or computed from static dims (the in-projection's
// q/k/v bounds are multiples of the embedding size read from a Shape).
std::optional<int64_t> OneInt(const Value* v) {
  if (std::optional<Tensor> t = ConstantTensor(v)) {
    if (t->numel() != 1) return std::nullopt;
    return t->ToInt64Vector()[0];
  }
  std::optional<DimsValue> d = DimsValueOf(v);
  if (!d || d->size() != 1 || !(*d)[0].known) return std::nullopt;
  return (*d)[0].value;
}

// The piece a SliceGrad puts back: one axis, step 1, constant bounds within X's static size along the axis.
std::optional<Piece> ReadPiece(const Graph& g, Node* sg) {
  if (!IsInternalOp(sg, "SliceGrad") || sg->outputs.size() != 1 || !Private(g, sg->outputs[0])) return std::nullopt;
  if (!sg->has_input(0) || !sg->has_input(1) || !sg->has_input(2) || !sg->has_input(3)) return std::nullopt;
  const Value* x = ShapeSource(sg->inputs[1]);
  const Shape& xs = x == sg->inputs[1] ? sg->outputs[0]->shape : x->shape;
  if (!xs.known_rank()) return std::nullopt;
  const int r = xs.rank();
  std::optional<int64_t> s = OneInt(sg->inputs[2]), e = OneInt(sg->inputs[3]);
  std::optional<int64_t> a = sg->has_input(4) ? OneInt(sg->inputs[4]) : std::optional<int64_t>(0);
  std::optional<int64_t> step = sg->has_input(5) ? OneInt(sg->inputs[5]) : std::optional<int64_t>(1);
  if (!s || !e || !a || !step || *step != 1 || *a < -r || *a >= r) return std::nullopt;
  Piece p;
  p.node = sg;
  p.axis = static_cast<int>(*a < 0 ? *a + r : *a);
  const Dim& d = xs[p.axis];
  if (!d.is_static()) return std::nullopt;
  const int64_t dim = d.value;
  auto clamp = [dim](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + dim : v, 0, dim); };
  p.start = clamp(*s);
  p.end = clamp(*e);
  if (p.end <= p.start) return std::nullopt;
  return p;
}

}  // namespace

bool SliceGradConcatPass::Run(Graph& g) {
  concats_ = 0;
  InferShapes(g, /*strict=*/false);
  std::vector<Node*> sums;
  for (const auto& up : g.nodes())
    if (IsOp(up.get(), "Sum")) sums.push_back(up.get());
  for (Node* sum : sums) {
    // The Sum's SliceGrad terms, grouped by what they are the gradient of and along which axis.
    std::map<std::pair<const Value*, int>, std::vector<Piece>> groups;
    for (Value* in : sum->inputs) {
      if (!in) continue;
      if (std::optional<Piece> p = ReadPiece(g, in->producer))
        groups[{ShapeSource(p->node->inputs[1]), p->axis}].push_back(*p);
    }
    for (auto& [key, pieces] : groups) {
      if (pieces.size() < 2) continue;
      std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.start < b.start; });
      const Shape& xs = key.first->shape.known_rank() ? key.first->shape : pieces[0].node->outputs[0]->shape;
      bool tiles = pieces.front().start == 0 && pieces.back().end == xs[key.second].value;
      for (size_t i = 1; i < pieces.size() && tiles; ++i) tiles = pieces[i].start == pieces[i - 1].end;
      if (!tiles) continue;
      std::vector<Value*> parts;
      for (const Piece& p : pieces) parts.push_back(p.node->inputs[0]);
      const bool whole = pieces.size() == static_cast<size_t>(std::count_if(sum->inputs.begin(), sum->inputs.end(),
                                                                            [](Value* v) { return v; }));
      std::vector<Node*> shapes;
      for (const Piece& p : pieces)
        if (IsOp(p.node->inputs[1]->producer, "Shape")) shapes.push_back(p.node->inputs[1]->producer);
      std::vector<Node*> slice_grads;
      for (const Piece& p : pieces) slice_grads.push_back(p.node);
      const std::string name = g.UniqueName(sum->name + "/Concat");
      if (whole) {
        // The Concat makes the Sum's own output (the value autodiff recorded as X's gradient).
        Value* out = sum->outputs[0];
        g.RemoveNodes(slice_grads);
        g.RemoveNode(sum);
        Node* cat = g.AddNode("Concat", parts, {out}, name);
        cat->attrs["axis"] = Attribute::Int(key.second);
      } else {
        // The Sum reads the Concat in place of its first piece; the other pieces leave it.
        Value* dx = g.AddValue(g.UniqueName(sum->name + "/concat"));
        std::vector<Value*> ins;
        bool placed = false;
        for (Value* in : sum->inputs) {
          const bool piece =
              std::any_of(pieces.begin(), pieces.end(), [&](const Piece& p) { return in && in->producer == p.node; });
          if (!piece) {
            ins.push_back(in);
          } else if (!placed) {
            ins.push_back(dx);
            placed = true;
          }
        }
        g.RemoveNodes(slice_grads);
        for (int i = static_cast<int>(sum->inputs.size()) - 1; i >= 0; --i) g.SetInput(sum, i, nullptr);
        sum->inputs.clear();
        for (size_t i = 0; i < ins.size(); ++i) g.SetInput(sum, static_cast<int>(i), ins[i]);
        Node* cat = g.AddNode("Concat", parts, {dx}, name);
        cat->attrs["axis"] = Attribute::Int(key.second);
      }
      // The Shape nodes only the pieces read.
      std::vector<Node*> unread;
      for (Node* sh : shapes)
        if (std::find(unread.begin(), unread.end(), sh) == unread.end() && sh->outputs[0]->uses.empty() &&
            std::find(g.outputs.begin(), g.outputs.end(), sh->outputs[0]) == g.outputs.end())
          unread.push_back(sh);
      g.RemoveNodes(unread);
      ++concats_;
      if (whole) break;  // the Sum is gone
    }
  }
  if (concats_) InferShapes(g, /*strict=*/false);
  return concats_ > 0;
}

}  // namespace ot
