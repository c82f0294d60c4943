#include "passes/slice_pushdown.h"

#include <optional>
#include <vector>

#include "graph/op_registry.h"
#include "passes/fuse_util.h"

namespace ot {

namespace {

using namespace fuse;

// The Slice's axes, normalized for an input of rank r; nullopt when they are not constants (or out of range).
std::optional<std::vector<int64_t>> SliceAxes(const Node* s, int r) {
  std::vector<int64_t> axes;
  size_t count = 0;
  if (s->opset < 10) {
    count = s->attr_ints("starts").size();
    axes = s->attr_ints("axes");
  } else {
    for (int i = 1; i <= 4; ++i)
      if (s->has_input(i) && !ConstantTensor(s->inputs[i])) return std::nullopt;
    if (!s->has_input(1)) return std::nullopt;
    count = static_cast<size_t>(ConstantTensor(s->inputs[1])->numel());
    if (s->has_input(3)) axes = ConstantTensor(s->inputs[3])->ToInt64Vector();
  }
  if (axes.empty())
    for (size_t i = 0; i < count; ++i) axes.push_back(static_cast<int64_t>(i));
  for (int64_t& a : axes) {
    if (a < -r || a >= r) return std::nullopt;
    if (a < 0) a += r;
  }
  return axes;
}

// The elementwise ops a bias-like operand may take part in.
bool IsRowwiseBinary(const Node* n) { return IsOp(n, "Add") || IsOp(n, "Sub") || IsOp(n, "Mul") || IsOp(n, "Div"); }

// Ops of one input, element by element (GPT-Neo casts its logits to float32 before the shift).
bool IsElementwiseUnary(const Node* n) {
  for (const char* op : {"Cast", "Identity", "Relu", "Gelu", "Tanh", "Sigmoid", "Neg", "Erf", "Abs", "Exp"})
    if (IsOp(n, op)) return n->inputs.size() == 1 && n->has_input(0);
  return false;
}

// `other`, broadcast against a value of rank r from the right, is of size 1 at every sliced axis (and of rank <= r,
// so it widens nothing): each row of the result depends on the same row of the sliced operand only.
bool ConstantAlongAxes(const Value* other, int r, const std::vector<int64_t>& axes) {
  if (!other || !other->shape.known_rank()) return false;
  const int ro = other->shape.rank();
  if (ro > r) return false;
  for (int64_t a : axes) {
    const int i = static_cast<int>(a) - (r - ro);
    if (i < 0) continue;
    const Dim& d = other->shape[i];
    if (!d.is_static() || d.value != 1) return false;
  }
  return true;
}

// The MatMul whose first input the Slice `s` can move to, walking up from its input through rowwise binary ops;
// nullptr when the chain is anything else.
Node* LayerBelow(const Graph& g, const Node* s, const std::vector<int64_t>& axes, int r) {
  const Value* cur = s->inputs[0];
  for (int depth = 0; depth < 6; ++depth) {
    if (!Private(g, cur)) return nullptr;
    Node* p = cur->producer;
    if (!p || p->outputs.size() != 1) return nullptr;
    if (IsOp(p, "MatMul")) {
      const Value* h = p->inputs[0];
      const Value* w = p->inputs[1];
      if (!h || !w || !h->shape.known_rank() || h->shape.rank() != r || !w->shape.known_rank() || w->shape.rank() != 2)
        return nullptr;
      return p;
    }
    if (IsElementwiseUnary(p)) {
      if (!p->outputs[0]->shape.known_rank() || p->outputs[0]->shape.rank() != r) return nullptr;
      cur = p->inputs[0];
      continue;
    }
    if (!IsRowwiseBinary(p)) return nullptr;
    // The chain goes on through the operand whose partner is constant along the sliced axes (the bias).
    const Value* up = nullptr;
    if (p->inputs.size() == 2 && ConstantAlongAxes(p->inputs[1], r, axes))
      up = p->inputs[0];
    else if (p->inputs.size() == 2 && ConstantAlongAxes(p->inputs[0], r, axes))
      up = p->inputs[1];
    if (!up || !p->outputs[0]->shape.known_rank() || p->outputs[0]->shape.rank() != r) return nullptr;
    cur = up;
  }
  return nullptr;
}

}  // namespace

bool SlicePushdownPass::Run(Graph& g) {
  moved_ = 0;
  InferShapes(g, /*strict=*/false);
  bool again = true;
  while (again) {  // restart after each rewrite: it deletes a node
    again = false;
    for (const auto& up : g.nodes()) {
      Node* s = up.get();
      if (!IsOp(s, "Slice") || !s->has_input(0) || s->outputs.size() != 1) continue;
      const Value* y = s->inputs[0];
      if (!y->shape.known_rank() || y->shape.rank() < 2) continue;
      const int r = y->shape.rank();
      const std::optional<std::vector<int64_t>> axes = SliceAxes(s, r);
      if (!axes || axes->empty()) continue;
      bool leading = true;
      for (int64_t a : *axes) leading = leading && a < r - 1;
      if (!leading) continue;
      Node* mm = LayerBelow(g, s, *axes, r);
      if (!mm) continue;
      // A Slice of the same constants on the layer's input; the layer's chain now computes z.
      Value* h = mm->inputs[0];
      Value* hs = g.AddValue(g.UniqueName(h->name + ".sliced"));
      std::vector<Value*> ins = s->inputs;
      ins[0] = h;
      Node* moved = g.AddNode("Slice", ins, {hs}, g.UniqueName(s->name + "/pushed"));
      moved->domain = s->domain;
      moved->opset = s->opset;
      moved->attrs = s->attrs;
      g.SetInput(mm, 0, hs);
      Value* z = s->outputs[0];
      Value* bottom = s->inputs[0];
      g.RemoveNode(s);
      g.ReplaceAllUses(z, bottom);
      ++moved_;
      again = true;
      break;
    }
  }
  if (moved_) InferShapes(g, /*strict=*/false);
  return moved_ > 0;
}

}  // namespace ot
