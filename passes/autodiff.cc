#include "passes/autodiff.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "graph/error.h"
#include "graph/grad_context.h"
#include "graph/op_registry.h"

namespace ot {

namespace {
// The sum of a value's gradient contributions (one node when there are several).
Value* SumOf(Graph& g, const std::vector<Value*>& parts, const std::string& name) {
  if (parts.size() == 1) return parts[0];
  Value* out = g.AddValue(g.UniqueName(name + "_grad_sum"));
  Node* n = g.AddNode("Sum", parts, {out}, g.UniqueName(name + "/grad/Sum"));
  InferNode(*n);
  return out;
}
}  // namespace

bool AutodiffPass::Run(Graph& g) {
  InferShapes(g, /*strict=*/false);
  Value* loss = g.FindValue(opts_.loss);
  if (!loss) throw Error("autodiff: the loss '" + opts_.loss + "' is not a value of the model");
  if (!IsFloat(loss->dtype)) throw Error("autodiff: the loss '" + opts_.loss + "' is not a float tensor");
  if (!loss->shape.known_rank() || !loss->shape.NumElements() || *loss->shape.NumElements() != 1)
    throw Error("autodiff: the loss '" + opts_.loss + "' must be a scalar (it is " + loss->shape.ToString() + ")");

  std::regex freeze;
  if (!opts_.freeze.empty()) {
    try {
      freeze = std::regex(opts_.freeze);
    } catch (const std::regex_error& e) {
      throw Error("--freeze: invalid regular expression '" + opts_.freeze + "': " + e.what());
    }
  }
  // Values that depend on some parameter differentiably: float values computed from such a float value through an
  // input that carries a gradient. A shape read (Shape, Size: no data read) or an integer value in between makes the
  // rest a constant of the parameters (attention's 1/sqrt(head dim) computed from Shape(q)), so no gradient -- and no
  // reduction of a whole activation to that scalar -- is built for it.
  const OpRegistry& reg = OpRegistry::Global();
  std::set<const Value*> depends;
  std::vector<Value*> candidates;
  for (const auto& v : g.values())
    if (v->initializer && IsFloat(v->initializer->dtype()) &&
        (opts_.freeze.empty() || !std::regex_search(v->name, freeze))) {
      depends.insert(v.get());
      candidates.push_back(v.get());
    }
  for (const std::string& name : opts_.inputs) {
    Value* v = g.FindValue(name);
    if (!v || std::find(g.inputs.begin(), g.inputs.end(), v) == g.inputs.end() || !IsFloat(v->dtype))
      throw Error("autodiff: '" + name + "' is not a float input of the graph");
    depends.insert(v);
    candidates.push_back(v);
  }
  const std::vector<Node*> order = g.TopologicalOrder();
  for (Node* n : order) {
    const OpSchema* s = reg.Find(n->domain, n->op_type);
    if (s && !s->reads_input_data) continue;
    bool dep = false;
    for (size_t i = 0; i < n->inputs.size() && !dep; ++i) {
      const Value* in = n->inputs[i];
      if (!in || !depends.count(in) || !IsFloat(in->dtype)) continue;
      dep = !s || std::find(s->non_differentiable.begin(), s->non_differentiable.end(), static_cast<int>(i)) ==
                      s->non_differentiable.end();
    }
    if (dep)
      for (Value* o : n->outputs)
        if (o && IsFloat(o->dtype)) depends.insert(o);
  }
  if (!depends.count(loss)) throw Error("autodiff: the loss '" + opts_.loss + "' depends on no trainable parameter");

  // Gradient contributions per value, seeded at the loss.
  std::map<const Value*, std::vector<Value*>> contrib;
  Tensor one(loss->dtype, loss->shape.StaticDims());
  one.SetDouble(0, 1.0);
  seed_ = g.AddInitializer(g.UniqueName(loss->name + "_grad_seed"), std::move(one));
  contrib[loss].push_back(seed_);

  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    std::vector<Value*> dys(n->outputs.size(), nullptr);
    bool any = false;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      Value* o = n->outputs[i];
      if (!o || !contrib.count(o)) continue;
      dys[i] = SumOf(g, contrib[o], o->name);
      any = true;
    }
    if (!any) continue;
    const OpSchema* s = reg.Find(n->domain, n->op_type);
    std::vector<bool> needs(n->inputs.size(), false);
    bool need_any = false;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      needs[i] = n->inputs[i] && depends.count(n->inputs[i]) && IsFloat(n->inputs[i]->dtype);
      if (s)
        for (int nd : s->non_differentiable)
          if (nd == static_cast<int>(i)) needs[i] = false;
      need_any |= needs[i];
    }
    if (!need_any) continue;
    if (!s || !s->grad)
      throw Error(n->Describe() + ": no gradient rule for op " + n->op_type +
                  " (it lies between a trainable parameter and the loss)");
    GradContext ctx(g, *n, dys, needs);
    s->grad(ctx);
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      if (!needs[i]) continue;
      Value* dx = ctx.input_grads()[i];
      if (!dx) throw Error(n->Describe() + ": the gradient rule gave no gradient for input " + std::to_string(i));
      contrib[n->inputs[i]].push_back(dx);
    }
  }

  params_.clear();
  grads_.clear();
  for (Value* p : candidates) {
    auto it = contrib.find(p);
    if (it == contrib.end()) continue;  // reaches the loss through no differentiable path
    Value* total = SumOf(g, it->second, p->name);
    Value* named = g.AddValue(g.FindValue(p->name + "_grad") ? g.UniqueName(p->name + "_grad") : p->name + "_grad");
    Node* id = g.AddNode("Identity", {total}, {named}, g.UniqueName(p->name + "/grad/Identity"));
    InferNode(*id);
    g.outputs.push_back(named);
    params_.push_back(p);
    grads_.push_back(named);
  }
  return true;
}

}  // namespace ot
