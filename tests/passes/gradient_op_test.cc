// gradient_op: ai.onnx.preview.training Gradient nodes expanded into the backward by autodiff. The expanded graph
// runs on the CPU executor and its gradients are compared with analytic ones computed in double on fresh random
// inputs; negative twins: a graph without Gradient is left alone, and unsupported or malformed nodes are errors
// naming the node.
#include "passes/gradient_op.h"

#include <gtest/gtest.h>

#include <cmath>

#include "executor/executor.h"
#include "graph/error.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::ExpectClose;
using test::RandomTensor;

constexpr const char* kDomain = "ai.onnx.preview.training";

Value* Input(Graph& g, const std::string& name, const std::vector<int64_t>& dims) {
  Value* v = g.AddValue(name);
  v->dtype = DataType::kFloat64;
  v->shape = Shape::Static(dims);
  g.inputs.push_back(v);
  return v;
}

Value* Op(Graph& g, const std::string& op, const std::vector<Value*>& ins, const std::string& out) {
  Value* o = g.AddValue(out);
  g.AddNode(op, ins, {o}, out + "_node");
  return o;
}

Node* Gradient(Graph& g, const std::vector<Value*>& ins, const std::vector<std::string>& xs, const std::string& y,
               const std::vector<std::string>& outs, const std::vector<std::string>& zs = {}) {
  std::vector<Value*> ov;
  for (const auto& o : outs) ov.push_back(g.AddValue(o));
  Node* n = g.AddNode("Gradient", ins, ov, "my_gradient");
  n->domain = kDomain;
  n->opset = 1;
  Attribute a;
  a.kind = Attribute::Kind::kStrings;
  a.strings = xs;
  n->attrs["xs"] = a;
  if (!zs.empty()) {
    a.strings = zs;
    n->attrs["zs"] = a;
  }
  n->attrs["y"] = Attribute::String(y);
  for (Value* v : ov) g.outputs.push_back(v);
  return n;
}

std::unique_ptr<Graph> NewGraph() {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  g->opset_imports[kDomain] = 1;
  return g;
}

// y = ReduceSum((a + b) * a) (keepdims 0): dy/da = 2a + b, dy/db = a; c (not reaching y) gets zeros.
TEST(GradientOp, ExpandsToTheBackward) {
  auto g = NewGraph();
  Value* a = Input(*g, "a", {2, 3});
  Value* b = Input(*g, "b", {2, 3});
  Value* c = Input(*g, "c", {4});
  Value* s = Op(*g, "Add", {a, b}, "s");
  Value* m = Op(*g, "Mul", {s, a}, "m");
  Value* y = Op(*g, "ReduceSum", {m}, "y");
  y->producer->attrs["keepdims"] = Attribute::Int(0);
  g->outputs.push_back(y);
  Gradient(*g, {a, b, c}, {"a", "b", "c"}, "y", {"dy_da", "dy_db", "dy_dc"});
  ASSERT_TRUE(ExpandGradientOps(*g));
  for (const auto& n : g->nodes()) EXPECT_NE(n->op_type, "Gradient");
  EXPECT_FALSE(a->is_initializer());  // inputs stay inputs
  ASSERT_EQ(g->outputs.size(), 4u);   // y and the three gradients, no extra outputs
  Tensor ta = RandomTensor(DataType::kFloat64, {2, 3}), tb = RandomTensor(DataType::kFloat64, {2, 3}),
         tc = RandomTensor(DataType::kFloat64, {4});
  Executor ex(*g);
  auto out = ex.Run({{"a", ta}, {"b", tb}, {"c", tc}});
  ASSERT_EQ(out.size(), 4u);
  Tensor da(DataType::kFloat64, {2, 3}), db(DataType::kFloat64, {2, 3});
  double ysum = 0;
  for (int64_t i = 0; i < 6; ++i) {
    const double x = ta.GetDouble(i), z = tb.GetDouble(i);
    ysum += (x + z) * x;
    da.SetDouble(i, 2 * x + z);
    db.SetDouble(i, x);
  }
  EXPECT_NEAR(out[0].GetDouble(0), ysum, 1e-12);
  ExpectClose(out[1], da, 1e-12, 1e-12);
  ExpectClose(out[2], db, 1e-12, 1e-12);
  ExpectClose(out[3], Tensor(DataType::kFloat64, {4}), 0, 0);
}

// A non-scalar y is differentiated as the sum of its elements: y = a * b -> dy/da = b.
TEST(GradientOp, NonScalarYIsSummed) {
  auto g = NewGraph();
  Value* a = Input(*g, "a", {3});
  Value* b = Input(*g, "b", {3});
  Op(*g, "Mul", {a, b}, "y");
  Gradient(*g, {a, b}, {"a"}, "y", {"dy_da"}, {"b"});
  ASSERT_TRUE(ExpandGradientOps(*g));
  Tensor ta = RandomTensor(DataType::kFloat64, {3}), tb = RandomTensor(DataType::kFloat64, {3});
  auto out = Executor(*g).Run({{"a", ta}, {"b", tb}});
  ASSERT_EQ(out.size(), 1u);
  ExpectClose(out[0], tb, 1e-12, 1e-12);
}

TEST(GradientOp, NoGradientNodeNoChange) {
  auto g = NewGraph();
  Value* a = Input(*g, "a", {3});
  g->outputs.push_back(Op(*g, "Neg", {a}, "y"));
  EXPECT_FALSE(ExpandGradientOps(*g));
  EXPECT_EQ(g->nodes().size(), 1u);
}

template <typename E, typename F>
void ExpectThrows(F&& f, const std::vector<std::string>& pieces) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one with '" << pieces.at(0) << "'";
  } catch (const E& e) {
    for (const auto& p : pieces) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(GradientOp, ErrorsNameTheNode) {
  {  // y is not a value of the graph
    auto g = NewGraph();
    Value* a = Input(*g, "a", {3});
    Op(*g, "Neg", {a}, "y");
    Gradient(*g, {a}, {"a"}, "nope", {"d"});
    ExpectThrows<Error>([&] { ExpandGradientOps(*g); }, {"my_gradient", "Gradient", "'nope'"});
  }
  {  // the input is not the value xs names (feeding other values is unsupported)
    auto g = NewGraph();
    Value* a = Input(*g, "a", {3});
    Value* b = Input(*g, "b", {3});
    Op(*g, "Neg", {a}, "y");
    Gradient(*g, {b}, {"a"}, "y", {"d"});
    ExpectThrows<UnsupportedError>([&] { ExpandGradientOps(*g); }, {"my_gradient", "'a'"});
  }
  {  // a z that depends on an x
    auto g = NewGraph();
    Value* a = Input(*g, "a", {3});
    Value* z = Op(*g, "Neg", {a}, "z");
    Op(*g, "Mul", {z, a}, "y");
    Gradient(*g, {a, z}, {"a"}, "y", {"d"}, {"z"});
    ExpectThrows<UnsupportedError>([&] { ExpandGradientOps(*g); }, {"my_gradient", "'z'"});
  }
}

}  // namespace
}  // namespace ot
