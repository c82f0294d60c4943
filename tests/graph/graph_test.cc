// IR tests: def-use bookkeeping, topological order, the verifier's errors, the printer, and shape inference
// with symbolic dims carried through the registry.
#include "graph/graph.h"

#include <gtest/gtest.h>

#include "graph/error.h"
#include "graph/op_registry.h"
#include "graph/printer.h"
#include "graph/verifier.h"

namespace ot {
namespace {

struct Mlp {
  Graph g;
  Value *x, *w, *b, *y;
  Node *mm, *add, *relu;
  Mlp() {
    g.opset_imports[""] = 17;
    x = g.AddValue("x");
    x->dtype = DataType::kFloat32;
    x->shape = Shape({Dim::Symbol("batch"), Dim(4)});
    g.inputs.push_back(x);
    w = g.AddInitializer("w", Tensor(DataType::kFloat32, {4, 3}));
    b = g.AddInitializer("b", Tensor(DataType::kFloat32, {3}));
    Value* h = g.AddValue("h");
    Value* z = g.AddValue("z");
    y = g.AddValue("y");
    // Inserted out of order on purpose: relu first.
    relu = g.AddNode("Relu", {z}, {y}, "relu");
    mm = g.AddNode("MatMul", {x, w}, {h}, "mm");
    add = g.AddNode("Add", {h, b}, {z}, "add");
    g.outputs.push_back(y);
  }
};

TEST(Graph, TopologicalOrderFollowsDataNotInsertion) {
  Mlp m;
  std::vector<Node*> order = m.g.TopologicalOrder();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], m.mm);
  EXPECT_EQ(order[1], m.add);
  EXPECT_EQ(order[2], m.relu);
}

TEST(Graph, UsesTrackSetInputAndReplaceAllUses) {
  Mlp m;
  ASSERT_EQ(m.b->uses.size(), 1u);
  EXPECT_EQ(m.b->uses[0].node, m.add);
  Value* b2 = m.g.AddInitializer("b2", Tensor(DataType::kFloat32, {3}));
  m.g.ReplaceAllUses(m.b, b2);
  EXPECT_TRUE(m.b->uses.empty());
  ASSERT_EQ(b2->uses.size(), 1u);
  EXPECT_EQ(m.add->inputs[1], b2);
  EXPECT_NO_THROW(VerifyGraph(m.g));
}

TEST(Graph, CycleIsReportedWithTheNode) {
  Graph g;
  Value* a = g.AddValue("a");
  Value* b = g.AddValue("b");
  g.AddNode("Relu", {a}, {b}, "n1");
  g.AddNode("Relu", {b}, {a}, "n2");
  g.outputs.push_back(b);
  try {
    g.TopologicalOrder();
    FAIL() << "no error for a cycle";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
  }
}

TEST(Verifier, UndefinedInputNamesNodeAndValue) {
  Mlp m;
  Value* ghost = m.g.AddValue("ghost");
  m.g.SetInput(m.add, 1, ghost);
  try {
    VerifyGraph(m.g);
    FAIL() << "undefined input accepted";
  } catch (const Error& e) {
    std::string s = e.what();
    EXPECT_NE(s.find("'add'"), std::string::npos) << s;
    EXPECT_NE(s.find("'ghost'"), std::string::npos) << s;
  }
}

TEST(Verifier, ValidGraphPassesAndUndefinedOutputFails) {
  Mlp m;
  EXPECT_NO_THROW(VerifyGraph(m.g));
  m.g.outputs.push_back(m.g.AddValue("nowhere"));
  EXPECT_THROW(VerifyGraph(m.g), Error);
}

TEST(Graph, SecondProducerIsRejected) {
  Mlp m;
  EXPECT_THROW(m.g.AddNode("Neg", {m.x}, {m.y}, "again"), Error);
}

TEST(ShapeInference, SymbolicBatchIsCarriedThrough) {
  Mlp m;
  InferShapes(m.g, /*strict=*/true);
  EXPECT_EQ(m.y->dtype, DataType::kFloat32);
  ASSERT_TRUE(m.y->shape.known_rank());
  EXPECT_EQ(m.y->shape.ToString(), "[batch,3]");
}

TEST(ShapeInference, MismatchNamesTheNode) {
  Mlp m;
  m.g.SetInput(m.add, 1, m.g.AddInitializer("b5", Tensor(DataType::kFloat32, {5})));
  try {
    InferShapes(m.g, true);
    FAIL() << "[batch,3] + [5] accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'add'"), std::string::npos) << e.what();
  }
}

TEST(ShapeInference, ReadsConstantNodeValues) {
  // Reshape's shape from a Constant node (as exporters write it): the output gets its rank and dims.
  Graph g;
  g.opset_imports[""] = 13;
  Value* x = g.AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape({Dim(2), Dim(6)});
  g.inputs.push_back(x);
  Value* shape = g.AddValue("shape");
  g.AddNode("Constant", {}, {shape}, "c")->attrs["value"] = Attribute::TensorValue(Tensor::FromInt64({3, 4}, {2}));
  Value* y = g.AddValue("y");
  g.AddNode("Reshape", {x, shape}, {y}, "r");
  g.outputs.push_back(y);
  InferShapes(g, true);
  ASSERT_TRUE(y->shape.known_rank());
  EXPECT_EQ(y->shape.ToString(), "[3,4]");
  // The same shape as a graph input (value unknown): rank 2, dims unknown.
  Value* s2 = g.AddValue("s2");
  s2->dtype = DataType::kInt64;
  s2->shape = Shape({Dim(2)});
  g.inputs.push_back(s2);
  g.SetInput(y->producer, 1, s2);
  InferShapes(g, true);
  EXPECT_EQ(y->shape.rank(), 2);
  EXPECT_FALSE(y->shape.is_static());
}

TEST(ShapeInference, UnknownOpIsUnsupportedWhenStrict) {
  Mlp m;
  m.relu->op_type = "NoSuchOp";
  EXPECT_THROW(InferShapes(m.g, true), UnsupportedError);
  EXPECT_NO_THROW(InferShapes(m.g, false));
  EXPECT_FALSE(m.y->shape.known_rank());
}

TEST(Printer, ShowsTypesOpsAttributesAndOrder) {
  Mlp m;
  m.relu->attrs["note"] = Attribute::Int(7);
  InferShapes(m.g);
  std::string text = PrintGraph(m.g);
  EXPECT_NE(text.find("input %x: float32[batch,4]"), std::string::npos) << text;
  EXPECT_NE(text.find("%h: float32[batch,3] = MatMul(%x, %w)"), std::string::npos) << text;
  EXPECT_NE(text.find("Relu(%z) {note=7}"), std::string::npos) << text;
  EXPECT_LT(text.find("MatMul"), text.find("Relu")) << text;
}

TEST(Shape, StaticAndSymbolic) {
  Shape s({Dim(2), Dim::Symbol("n")});
  EXPECT_FALSE(s.is_static());
  EXPECT_FALSE(s.NumElements().has_value());
  EXPECT_THROW(s.StaticDims(), Error);
  Shape t = Shape::Static({2, 3, 4});
  EXPECT_EQ(*t.NumElements(), 24);
  EXPECT_EQ(Dim::Symbol("n"), Dim::Symbol("n"));
  EXPECT_NE(Dim(), Dim());  // two unknown dims are not known to be equal
}

TEST(Tensor, CastTruncatesTowardZeroAndRejectsBadShapes) {
  Tensor t = Tensor::FromFloat({-1.7f, 2.9f, 0.5f}, {3});
  Tensor i = t.CastTo(DataType::kInt32);
  EXPECT_EQ(i.data<int32_t>()[0], -1);
  EXPECT_EQ(i.data<int32_t>()[1], 2);
  EXPECT_EQ(i.data<int32_t>()[2], 0);
  EXPECT_THROW(Tensor(DataType::kFloat32, {-1, 2}), Error);
  EXPECT_THROW(Tensor(DataType::kFloat32, {int64_t(1) << 40, int64_t(1) << 30}), Error);
  EXPECT_THROW(Tensor(DataType::kString, {1}), UnsupportedError);
}

}  // namespace
}  // namespace ot
