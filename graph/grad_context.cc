#include "graph/grad_context.h"

#include "graph/error.h"
#include "graph/op_registry.h"

namespace ot {

std::vector<Value*> GradContext::OpN(const std::string& op_type, const std::vector<Value*>& inputs, int num_outputs,
                                     const std::map<std::string, Attribute>& attrs, const std::string& domain) {
  std::vector<Value*> outs;
  for (int i = 0; i < num_outputs; ++i) outs.push_back(g_.AddValue(g_.UniqueName(node_.name + "/grad/" + op_type)));
  Node* n = g_.AddNode(op_type, inputs, outs, g_.UniqueName(node_.name + "/grad/" + op_type));
  n->domain = domain;
  n->opset = domain.empty() ? g_.OpsetOf("") : 1;
  n->attrs = attrs;
  InferNode(*n);  // later rules read the types and shapes of what earlier ones emitted
  return outs;
}

Value* GradContext::Op(const std::string& op_type, const std::vector<Value*>& inputs,
                       const std::map<std::string, Attribute>& attrs, const std::string& domain) {
  return OpN(op_type, inputs, 1, attrs, domain)[0];
}

Value* GradContext::Ints(const std::vector<int64_t>& v) {
  return g_.AddInitializer(g_.UniqueName(node_.name + "/grad/const"),
                           Tensor::FromInt64(v, {static_cast<int64_t>(v.size())}));
}

Value* GradContext::Scalar(double v, const Value* like) {
  Tensor t(like->dtype == DataType::kUndefined ? DataType::kFloat32 : like->dtype, {});
  t.SetDouble(0, v);
  return g_.AddInitializer(g_.UniqueName(node_.name + "/grad/const"), std::move(t));
}

Value* GradContext::ReduceToShape(Value* grad, Value* like) {
  // Equal shapes need no reduction: every dim static and equal, or the same named symbol (Dim::operator==; an
  // unnamed unknown dim equals nothing, so a shape with one is never elided).
  if (grad->shape.known_rank() && like->shape.known_rank() && grad->shape == like->shape) return grad;
  Value* shape = Op("Shape", {like});
  return Op("ReduceToShape", {grad, shape}, {}, kInternalDomain);
}

void GradContext::Fail(const std::string& msg) const { throw Error(node_.Describe() + ": gradient: " + msg); }

}  // namespace ot
