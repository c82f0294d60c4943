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

namespace {

// Sizes held in a tensor: int64/int32 of rank <= 1 and few elements (a shape, an index, an axis list).
std::optional<DimsValue> DimsOfTensor(const Tensor& t) {
  if ((t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32) || t.dims().size() > 1 || t.numel() > 64)
    return std::nullopt;
  DimsValue d;
  for (int64_t x : t.ToInt64Vector()) d.push_back(DimOrInt::Int(x));
  return d;
}

// Chains are short (Shape -> Gather -> Unsqueeze -> Concat); the bound keeps a pathological graph linear.
constexpr int kMaxDimsValueDepth = 16;

std::optional<DimsValue> DimsValueAt(const Value* v, int depth) {
  if (!v) return std::nullopt;
  if (v->initializer) return DimsOfTensor(*v->initializer);
  const Node* p = v->producer;
  if (!p || v->producer_output != 0 || depth >= kMaxDimsValueDepth) return std::nullopt;
  if (v->shape.known_rank() && v->shape.rank() > 1) return std::nullopt;
  if (p->op_type == "Constant" && p->domain.empty()) {
    const Attribute* a = p->attr("value");
    return a && a->kind == Attribute::Kind::kTensor ? DimsOfTensor(a->t) : std::nullopt;
  }
  const OpSchema* s = OpRegistry::Global().Find(p->domain, p->op_type);
  if (!s || !s->dims_value) return std::nullopt;
  return s->dims_value(*p, [p, depth](int i) -> std::optional<DimsValue> {
    return i < static_cast<int>(p->inputs.size()) ? DimsValueAt(p->inputs[i], depth + 1) : std::nullopt;
  });
}

}  // namespace

std::optional<DimsValue> DimsValueOf(const Value* v) { return DimsValueAt(v, 0); }

std::optional<DimsValue> InferContext::input_dims_value(int i) const {
  if (!has_input(i)) return std::nullopt;
  if (const Tensor* t = input_value(i)) return DimsOfTensor(*t);
  return i < static_cast<int>(node.inputs.size()) ? DimsValueOf(node.inputs[i]) : std::nullopt;
}

void InferContext::Fail(const std::string& msg) const { throw Error(node.Describe() + ": " + msg); }
void InferContext::RequireArity(int lo, int hi, int max_outputs) const {
  int n = static_cast<int>(node.inputs.size());
  while (n > 0 && !node.inputs[static_cast<size_t>(n - 1)]) --n;
  auto count = [](int k, const char* what) { return std::to_string(k) + " " + what + (k == 1 ? "" : "s"); };
  if (n < lo || n > hi)
    Fail(std::string("takes ") + (lo == hi ? count(lo, "input") : std::to_string(lo) + " to " + count(hi, "input")) +
         ", got " + std::to_string(n));
  if (static_cast<int>(node.outputs.size()) > max_outputs)
    Fail("has " + count(static_cast<int>(node.outputs.size()), "output") + ", the op has " +
         count(max_outputs, "output"));
}

void InferContext::Unsupported(const std::string& msg) const { throw UnsupportedError(node.Describe() + ": " + msg); }

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

void OpRegistry::SetGrad(const std::string& domain, const std::string& op_type, GradFn fn, std::vector<int> non_diff) {
  auto it = ops_.find({domain == "ai.onnx" ? "" : domain, op_type});
  if (it == ops_.end()) throw Error("gradient rule for unregistered op " + op_type);
  it->second.grad = std::move(fn);
  it->second.non_differentiable = std::move(non_diff);
}

void OpRegistry::SetAmp(const std::string& domain, const std::string& op_type, AmpClass c, std::vector<int> fp32_inputs,
                        std::vector<int> fp32_outputs, bool loss, bool fp32_inside) {
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

std::vector<std::string> UnsupportedNodes(const Graph& g) {
  const OpRegistry& reg = OpRegistry::Global();
  std::vector<std::string> lines;
  for (const auto& n : g.nodes()) {
    const OpSchema* s = reg.Find(n->domain, n->op_type);
    if (s && n->opset >= s->min_opset) continue;
    std::string line = "node '" + n->name + "': op " + n->op_type + " (" +
                       (n->domain.empty() ? std::string("ai.onnx") : n->domain) + ", opset " +
                       std::to_string(n->opset) + ") is not supported";
    if (s) line += " (from opset " + std::to_string(s->min_opset) + ")";
    lines.push_back(line);
  }
  return lines;
}

void RequireSupportedOps(const Graph& g, const std::string& where) {
  std::string msg;
  for (const std::string& line : UnsupportedNodes(g)) msg += (msg.empty() ? "" : "\n") + where + ": " + line;
  if (!msg.empty()) throw UnsupportedError(msg);
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

void OpRegistry::SetDimsValue(const std::string& domain, const std::string& op_type, DimsValueFn fn) {
  auto it = ops_.find({domain == "ai.onnx" ? "" : domain, op_type});
  if (it == ops_.end()) throw Error("data-propagation rule for unregistered op " + op_type);
  it->second.dims_value = std::move(fn);
}

void OpRegistry::SetRecomputeCheap(const std::string& domain, const std::string& op_type,
                                   bool trailing_outputs_optional) {
  auto it = ops_.find({domain == "ai.onnx" ? "" : domain, op_type});
  if (it == ops_.end()) throw Error("recompute facts for unregistered op " + op_type);
  it->second.recompute_cheap = true;
  it->second.trailing_outputs_optional = trailing_outputs_optional;
}

}  // namespace ot
