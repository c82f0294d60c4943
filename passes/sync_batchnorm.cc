#include "passes/sync_batchnorm.h"

#include <map>
#include <string>
#include <vector>

#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"

namespace ot {

namespace {

bool InTraining(const Node* n) {
  if (n->opset >= 14) return n->attr_int("training_mode", 0) != 0;
  if (n->opset < 7) return n->attr_int("is_test", 0) == 0;
  return n->outputs.size() > 1 && n->outputs[1];
}

// Emits nodes named after the batch norm they replace, each inferred as it is made.
struct Emit {
  Graph& g;
  std::string name;  // the batch norm's
  Value* Op(const std::string& op, const std::vector<Value*>& ins, const std::map<std::string, Attribute>& attrs = {},
            Value* out = nullptr, const std::string& domain = "") {
    if (!out) out = g.AddValue(g.UniqueName(name + "/sync/" + op));
    Node* n = g.AddNode(op, ins, {out}, g.UniqueName(name + "/sync/" + op));
    n->domain = domain;
    n->opset = domain.empty() ? g.OpsetOf("") : 1;
    n->attrs = attrs;
    InferNode(*n);
    return out;
  }
  Value* Ints(const std::vector<int64_t>& v) {
    return g.AddInitializer(g.UniqueName(name + "/sync/const"), Tensor::FromInt64(v, {static_cast<int64_t>(v.size())}));
  }
  // A Constant node, not an initializer: autodiff trains every float initializer.
  Value* Scalar(double v, DataType t) {
    Tensor s(t, {});
    s.SetDouble(0, v);
    return Op("Constant", {}, {{"value", Attribute::TensorValue(std::move(s))}});
  }
  // ReduceMean over `axes` keeping dims (axes as an attribute before opset 18, as an input from it).
  Value* Mean(Value* x, const std::vector<int64_t>& axes) {
    if (g.OpsetOf("") >= 18) return Op("ReduceMean", {x, Ints(axes)}, {{"keepdims", Attribute::Int(1)}});
    return Op("ReduceMean", {x}, {{"keepdims", Attribute::Int(1)}, {"axes", Attribute::Ints(axes)}});
  }
  Value* Slice(Value* x, int64_t i) { return Op("Slice", {x, Ints({i}), Ints({i + 1}), Ints({0})}); }
};

}  // namespace

bool SyncBatchNormPass::Run(Graph& g) {
  if (world_ <= 1) return false;
  std::vector<Node*> bns;
  for (Node* n : g.TopologicalOrder())
    if ((n->domain.empty() || n->domain == "ai.onnx") && n->op_type == "BatchNormalization" && InTraining(n))
      bns.push_back(n);
  for (Node* bn : bns) {
    for (size_t i = 3; i < bn->outputs.size(); ++i)
      if (bn->outputs[i] && !bn->outputs[i]->uses.empty())
        throw Error(bn->Describe() + ": --sync-batchnorm: its saved mean/variance output is read");
    Value* x = bn->inputs[0];
    if (!x->shape.known_rank() || x->shape.rank() < 2)
      throw Error(bn->Describe() + ": --sync-batchnorm needs the input's rank (at least 2), got " +
                  x->shape.ToString());
    const int rank = x->shape.rank();
    const DataType t = x->dtype == DataType::kUndefined ? DataType::kFloat32 : x->dtype;
    std::vector<int64_t> axes = {0}, bshape = {1, -1};
    for (int a = 2; a < rank; ++a) axes.push_back(a), bshape.push_back(1);
    const double eps = bn->attr_float("epsilon", 1e-5f), momentum = bn->attr_float("momentum", 0.9f);
    Value* y = bn->outputs[0];
    Value* mean_next = bn->outputs.size() > 1 ? bn->outputs[1] : nullptr;
    Value* var_next = bn->outputs.size() > 2 ? bn->outputs[2] : nullptr;
    Value *scale = bn->inputs[1], *bias = bn->inputs[2], *mean = bn->inputs[3], *var = bn->inputs[4];
    Emit e{g, bn->name};
    g.DetachNode(bn);
    g.RemoveNodes({bn});
    // Two collectives, as the one-process kernel's two passes: the global mean, then the mean of (X - m)^2 (not
    // E[X^2] - m^2, whose rounding differs from the kernel's by enough to part the trajectories within 30 steps).
    auto global_mean = [&](Value* local) {
      return e.Op("Mul", {e.Op("AllReduceSum", {local}, {{"world", Attribute::Int(world_)}}, nullptr, kInternalDomain),
                          e.Scalar(1.0 / world_, t)});
    };
    Value* m = global_mean(e.Mean(x, axes));
    Value* xc = e.Op("Sub", {x, m});
    Value* v = global_mean(e.Mean(e.Op("Mul", {xc, xc}), axes));
    Value* xn = e.Op("Div", {xc, e.Op("Sqrt", {e.Op("Add", {v, e.Scalar(eps, t)})})});
    Value* bs = e.Ints(bshape);
    e.Op("Add", {e.Op("Mul", {xn, e.Op("Reshape", {scale, bs})}), e.Op("Reshape", {bias, bs})}, {}, y);
    auto running = [&](Value* state, Value* batch, Value* next) {
      if (!next) return;
      const DataType st = state->dtype == DataType::kUndefined ? t : state->dtype;
      Value* b = e.Op("Reshape", {batch, e.Ints({-1})});
      if (st != t) b = e.Op("Cast", {b}, {{"to", Attribute::Int(static_cast<int64_t>(st))}});
      e.Op("Add", {e.Op("Mul", {state, e.Scalar(momentum, st)}), e.Op("Mul", {b, e.Scalar(1 - momentum, st)})}, {},
           next);
    };
    running(mean, m, mean_next);
    running(var, v, var_next);
  }
  if (!bns.empty()) g.opset_imports[kInternalDomain] = 1;
  return !bns.empty();
}

}  // namespace ot
