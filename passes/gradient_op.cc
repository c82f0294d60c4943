#include "passes/gradient_op.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "graph/error.h"
#include "graph/op_registry.h"
#include "passes/autodiff.h"

namespace ot {

namespace {

constexpr const char* kPreviewDomain = "ai.onnx.preview.training";

bool IsGradientNode(const Node& n) { return n.op_type == "Gradient" && n.domain == kPreviewDomain; }

// An ECMAScript regex that matches every name except those in `keep` (the freeze pattern of AutodiffPass).
std::string FreezeAllBut(const std::vector<std::string>& keep) {
  std::string alt;
  for (const std::string& k : keep) {
    if (!alt.empty()) alt += "|";
    for (char c : k) {
      if (std::string("\\^$.|?*+()[]{}/-").find(c) != std::string::npos) alt += '\\';
      alt += c;
    }
  }
  return "^(?!(?:" + alt + ")$)";
}

// Values that depend on any value of `from` (including them).
std::set<const Value*> Dependents(const Graph& g, const std::vector<Value*>& from) {
  std::set<const Value*> dep(from.begin(), from.end());
  for (Node* n : g.TopologicalOrder())
    for (Value* in : n->inputs)
      if (in && dep.count(in)) {
        for (Value* o : n->outputs)
          if (o) dep.insert(o);
        break;
      }
  return dep;
}

void ExpandOne(Graph& g, Node* gn) {
  const std::string desc = gn->Describe();
  const Attribute* xs_attr = gn->attr("xs");
  if (!xs_attr || xs_attr->strings.empty()) throw Error(desc + ": attribute xs is missing or empty");
  const std::vector<std::string> xs = xs_attr->strings;
  const std::vector<std::string> zs = gn->has_attr("zs") ? gn->attr("zs")->strings : std::vector<std::string>{};
  const std::string y_name = gn->attr_string("y", "");
  if (y_name.empty()) throw Error(desc + ": attribute y is missing");
  if (gn->inputs.size() != xs.size() + zs.size())
    throw Error(desc + ": has " + std::to_string(gn->inputs.size()) + " inputs but xs and zs name " +
                std::to_string(xs.size() + zs.size()));
  if (gn->outputs.size() != xs.size())
    throw Error(desc + ": has " + std::to_string(gn->outputs.size()) + " outputs but xs names " +
                std::to_string(xs.size()));
  std::vector<Value*> x_vals, z_vals;
  for (size_t i = 0; i < gn->inputs.size(); ++i) {
    const std::string& want = i < xs.size() ? xs[i] : zs[i - xs.size()];
    Value* v = gn->inputs[i];
    if (!v || v->name != want)
      throw UnsupportedError(desc + ": input " + std::to_string(i) + " is '" + (v ? v->name : "") +
                             "', not the value '" + want + "' named by xs/zs (feeding other values is not supported)");
    (i < xs.size() ? x_vals : z_vals).push_back(v);
    if (i < xs.size() && !IsFloat(v->dtype) && v->dtype != DataType::kUndefined)
      throw Error(desc + ": x '" + want + "' is " + DataTypeName(v->dtype) + ", not a float tensor");
  }
  Value* y = g.FindValue(y_name);
  if (!y) throw Error(desc + ": y '" + y_name + "' is not a value of the graph");
  const std::set<const Value*> dep = Dependents(g, x_vals);
  for (Value* z : z_vals)
    if (dep.count(z))
      throw UnsupportedError(desc + ": z '" + z->name +
                             "' depends on an x (stopping the gradient at z is not supported)");

  // The Gradient node goes first: its outputs stay as values that the new nodes produce.
  const std::string gname = gn->name;
  std::vector<Value*> outs = gn->outputs;
  g.RemoveNode(gn);  // gn is gone from here on
  std::vector<Value*> grads(xs.size(), nullptr);
  if (dep.count(y)) {
    InferShapes(g, /*strict=*/false);
    Value* loss = y;
    if (!y->shape.known_rank() || !y->shape.NumElements() || *y->shape.NumElements() != 1) {
      loss = g.AddValue(g.UniqueName(y_name + "_sum"));
      Node* rs = g.AddNode("ReduceSum", {y}, {loss}, g.UniqueName(y_name + "/Gradient/ReduceSum"));
      rs->attrs["keepdims"] = Attribute::Int(0);
      InferNode(*rs);
    }
    // Graph-input xs become parameters of the pass (initializers) only while it runs.
    std::vector<Value*> made;
    for (Value* x : x_vals) {
      if (x->is_initializer()) continue;
      if (!x->shape.known_rank() || !x->shape.is_static())
        throw UnsupportedError(desc + ": x '" + x->name + "' has no static shape (" + x->shape.ToString() + ")");
      x->initializer = std::make_shared<Tensor>(x->dtype, x->shape.StaticDims());
      made.push_back(x);
    }
    const size_t outputs_before = g.outputs.size();
    AutodiffPass ad({loss->name, FreezeAllBut(xs)});
    try {
      ad.Run(g);
    } catch (...) {
      for (Value* x : made) x->initializer.reset();
      throw;
    }
    for (Value* x : made) x->initializer.reset();
    // The pass adds "<x>_grad" graph outputs: they are this node's outputs instead.
    g.outputs.resize(outputs_before);
    for (size_t p = 0; p < ad.params().size(); ++p)
      for (size_t i = 0; i < x_vals.size(); ++i)
        if (ad.params()[p] == x_vals[i]) grads[i] = ad.grads()[p];
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    Value* out = outs[i];
    if (!out) continue;
    const std::string base = gname + "/" + out->name;
    if (grads[i]) {
      Node* id = g.AddNode("Identity", {grads[i]}, {out}, g.UniqueName(base + "/Identity"));
      InferNode(*id);
      continue;
    }
    // y does not depend on x_i: zeros like x_i.
    Value* shape = g.AddValue(g.UniqueName(base + "_shape"));
    Node* sh = g.AddNode("Shape", {x_vals[i]}, {shape}, g.UniqueName(base + "/Shape"));
    InferNode(*sh);
    Node* zeros = g.AddNode("ConstantOfShape", {shape}, {out}, g.UniqueName(base + "/ConstantOfShape"));
    const DataType t = x_vals[i]->dtype == DataType::kUndefined ? DataType::kFloat32 : x_vals[i]->dtype;
    zeros->attrs["value"] = Attribute::TensorValue(Tensor(t, {1}));
    InferNode(*zeros);
  }
}

}  // namespace

bool GradientOpPass::Run(Graph& g) {
  bool changed = false;
  for (;;) {
    Node* next = nullptr;
    for (const auto& n : g.nodes())
      if (IsGradientNode(*n)) {
        next = n.get();
        break;
      }
    if (!next) break;
    ExpandOne(g, next);
    changed = true;
  }
  return changed;
}

bool ExpandGradientOps(Graph& g) {
  for (const auto& n : g.nodes())
    if (IsGradientNode(*n)) return GradientOpPass().Run(g);
  return false;
}

}  // namespace ot
