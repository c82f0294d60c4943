#include "graph/op_registry.h"

#include "graph/error.h"
#include "graph/ops/register_all.h"

namespace ot {

InferContext::InferContext(const Node& n, std::vector<TypeShape> inputs, std::vector<const Tensor*> values,
                           int num_outputs)
    : node(n), inputs_(std::move(inputs)), values_(std::move(values)), outputs_(num_outputs) {}

DataType InferContext::input_type(int i) const {
  if (!has_input(i)) Fail("input " + std::to_string(i) + " is missing");
  return inputs_[i].dtype;
}

const Shape& InferContext::input_shape(int i) const {
  if (!has_input(i)) Fail("input " + std::to_string(i) + " is missing");
  return inputs_[i].shape;
}

const Shape& InferContext::Require(int i) const { return input_shape(i); }

void InferContext::set_output(int i, DataType t, Shape s) {
  if (i >= num_outputs()) return;
  outputs_[i].dtype = t;
  outputs_[i].shape = std::move(s);
  outputs_[i].present = true;
}

void InferContext::Fail(const std::string& msg) const { throw Error(node.Describe() + ": " + msg); }
void InferContext::Unsupported(const std::string& msg) const {
  throw UnsupportedError(node.Describe() + ": " + msg);
}

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* reg = [] {
    auto* r = new OpRegistry();
    RegisterAllOps(*r);
    return r;
  }();
  return *reg;
}

void OpRegistry::Register(OpSchema s) {
  std::string d = s.domain == "ai.onnx" ? "" : s.domain;
  ops_[{d, s.op_type}] = std::move(s);
}

void OpRegistry::SetGrad(const std::string& domain, const std::string& op_type, GradFn fn,
                         std::vector<int> non_diff) {
  auto it = ops_.find({domain == "ai.onnx" ? "" : domain, op_type});
  if (it == ops_.end()) throw Error("gradient rule for unregistered op " + op_type);
  it->second.grad = std::move(fn);
  it->second.non_differentiable = std::move(non_diff);
}

void OpRegistry::SetAmp(const std::string& domain, const std::string& op_type, AmpClass c,
                        std::vector<int> fp32_inputs, std::vector<int> fp32_outputs, bool loss, bool fp32_inside) {
  auto it = ops_.find({domain == "ai.onnx" ? "" : domain, op_type});
  if (it == ops_.end()) throw Error("AMP class for unregistered op " + op_type);
  it->second.amp = c;
  it->second.amp_fp32_inputs = std::move(fp32_inputs);
  it->second.amp_fp32_outputs = std::move(fp32_outputs);
  it->second.amp_loss = loss;
  it->second.amp_fp32_inside = fp32_inside;
}

const OpSchema* OpRegistry::Find(const std::string& domain, const std::string& op_type) const {
  std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = ops_.find({d, op_type});
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<const OpSchema*> OpRegistry::All() const {
  std::vector<const OpSchema*> r;
  for (const auto& [k, v] : ops_) r.push_back(&v);
  return r;
}

std::string UnsupportedReason(const OpRegistry& reg, const Node& n) {
  const OpSchema* s = reg.Find(n.domain, n.op_type);
  std::string op = (n.domain.empty() || n.domain == "ai.onnx" ? "" : n.domain + ".") + n.op_type;
  if (!s) return "op " + op + " is not supported";
  if (n.opset < s->min_opset)
    return "op " + op + " opset " + std::to_string(n.opset) + " is not supported (from opset " +
           std::to_string(s->min_opset) + ")";
  return "";
}

void InferNode(Node& node) {
  Node* n = &node;
  const OpRegistry& reg = OpRegistry::Global();
  std::string why = UnsupportedReason(reg, *n);
  if (!why.empty()) throw UnsupportedError(n->Describe() + ": " + why);
  std::vector<TypeShape> ins;
  std::vector<const Tensor*> vals;
  for (Value* v : n->inputs) {
    TypeShape ts;
    if (v) {
      ts.dtype = v->dtype;
      ts.shape = v->shape;
      ts.present = true;
    }
    ins.push_back(std::move(ts));
    // Known values: initializers, and Constant nodes' tensors (exporters emit Reshape shapes, Split sizes and
    // Unsqueeze axes as Constant nodes; without their values those outputs would lose their rank).
    const Tensor* val = v && v->initializer ? v->initializer.get() : nullptr;
    if (v && !val && v->producer && v->producer->op_type == "Constant" && v->producer->domain.empty())
      if (const Attribute* a = v->producer->attr("value"); a && a->kind == Attribute::Kind::kTensor) val = &a->t;
    vals.push_back(val);
  }
  InferContext ctx(*n, std::move(ins), std::move(vals), static_cast<int>(n->outputs.size()));
  reg.Find(n->domain, n->op_type)->infer(ctx);
  for (size_t i = 0; i < n->outputs.size(); ++i) {
    Value* o = n->outputs[i];
    if (!o) continue;
    const TypeShape& ts = ctx.outputs()[i];
    if (!ts.present) continue;
    o->dtype = ts.dtype;
    o->shape = ts.shape;
  }
}

void InferShapes(Graph& g, bool strict) {
  const OpRegistry& reg = OpRegistry::Global();
  for (Node* n : g.TopologicalOrder()) {
    if (!strict && !UnsupportedReason(reg, *n).empty()) {
      for (Value* o : n->outputs)
        if (o) o->shape = Shape();
      continue;
    }
    InferNode(*n);
  }
}

void OpRegistry::SetFusion(const std::string& domain, const std::string& op_type, FusibleKind kind,
                           ClusterLowerFn lower) {
  auto it = ops_.find({domain == "ai.onnx" ? "" : domain, op_type});
  if (it == ops_.end()) throw Error("fusion facts for unregistered op " + op_type);
  it->second.fusible = kind;
  it->second.lower = std::move(lower);
  it->second.recompute_cheap = true;
}

void OpRegistry::SetRecomputeCheap(const std::string& domain, const std::string& op_type,
                                   bool trailing_outputs_optional) {
  auto it = ops_.find({domain == "ai.onnx" ? "" : domain, op_type});
  if (it == ops_.end()) throw Error("recompute facts for unregistered op " + op_type);
  it->second.recompute_cheap = true;
  it->second.trailing_outputs_optional = trailing_outputs_optional;
}

}  // namespace ot
