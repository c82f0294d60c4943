// Data propagation (graph/ops/dims_value_table.cc): shapes computed from shapes, as exporters write a Reshape's
// target, keep their named dims through Shape, Gather, Unsqueeze, Concat, Slice, Cast and integer arithmetic;
// what cannot be followed stays unknown.
#include <gtest/gtest.h>

#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"

namespace ot {
namespace {

class DimsValueTest : public ::testing::Test {
 protected:
  Graph g;
  Value* x = nullptr;  // float32[batch,32,64]
  void SetUp() override {
    g.opset_imports[""] = 15;
    x = g.AddValue("x");
    x->dtype = DataType::kFloat32;
    x->shape = Shape({Dim::Symbol("batch"), Dim(32), Dim(64)});
    g.inputs.push_back(x);
  }
  Value* Ints(const std::vector<int64_t>& v, bool scalar = false) {
    return g.AddInitializer(
        g.UniqueName("k"),
        Tensor::FromInt64(v, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(v.size())}));
  }
  Value* Op(const std::string& op, std::vector<Value*> ins, std::map<std::string, Attribute> attrs = {}) {
    Value* out = g.AddValue(g.UniqueName(op + "_out"));
    Node* n = g.AddNode(op, std::move(ins), {out}, g.UniqueName(op));
    n->attrs = std::move(attrs);
    return out;
  }
  // Gather(Shape(v), i) as a 1-element vector: the exporter's Unsqueeze of the scalar.
  Value* DimOf(Value* v, int64_t i) {
    Value* s = Op("Shape", {v});
    return Op("Unsqueeze", {Op("Gather", {s, Ints({i}, true)}, {{"axis", Attribute::Int(0)}}), Ints({0})});
  }
  std::string Infer(Value* out) {
    g.outputs.push_back(out);
    InferShapes(g, /*strict=*/true);
    return out->shape.ToString();
  }
};

TEST_F(DimsValueTest, ReshapeKeepsTheBatchNameThroughTheExportersChain) {
  // x.view(B, T, 4, 16) as PyTorch exports it.
  Value* target = Op("Concat", {DimOf(x, 0), DimOf(x, 1), Ints({4}), Ints({16})}, {{"axis", Attribute::Int(0)}});
  Value* y = Op("Reshape", {x, target});
  EXPECT_EQ(Infer(y), "[batch,32,4,16]");
}

TEST_F(DimsValueTest, MinusOneIsResolvedAgainstTheNamedDims) {
  // x.view(B, -1), with a negative Gather index for the last dim's check elsewhere.
  Value* y = Op("Reshape", {x, Op("Concat", {DimOf(x, 0), Ints({-1})}, {{"axis", Attribute::Int(0)}})});
  Value* z = Op("Reshape", {x, Op("Concat", {Ints({-1}), DimOf(x, -1)}, {{"axis", Attribute::Int(0)}})});
  Infer(y);
  EXPECT_EQ(Infer(z), "[?,64]");  // -1 stands for batch * 32: no single name
  EXPECT_EQ(y->shape.ToString(), "[batch,2048]");
}

TEST_F(DimsValueTest, SliceCastAndArithmeticAreFollowed) {
  // heads = 4; x.view(*x.shape[:2], heads, x.shape[2] // heads), the sizes passing through Cast and Div.
  Value* lead = Op("Slice", {Op("Shape", {x}), Ints({0}), Ints({2})});
  Value* last = Op("Cast", {DimOf(x, 2)}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kInt64))}});
  Value* head_dim = Op("Div", {last, Ints({4})});
  Value* batch_times_one = Op("Mul", {DimOf(x, 0), Ints({1})});
  Value* y = Op("Reshape", {x, Op("Concat", {lead, Ints({4}), head_dim}, {{"axis", Attribute::Int(0)}})});
  Value* z = Op("Reshape", {x, Op("Concat", {batch_times_one, Ints({2048})}, {{"axis", Attribute::Int(0)}})});
  Infer(y);
  EXPECT_EQ(Infer(z), "[batch,2048]");
  EXPECT_EQ(y->shape.ToString(), "[batch,32,4,16]");
}

TEST_F(DimsValueTest, SliceBoundsFromSizesGiveStaticDims) {
  // x.chunk(2, dim=1) as PyTorch exports it: the bounds (C + 1) / 2 * 1 and * 2 from the input's own shape are
  // known integers, so the halves are [batch,16,64], not [batch,?,64].
  Value* half = Op("Div", {Op("Add", {DimOf(x, 1), Ints({1})}), Ints({2})});
  Value* e1 = Op("Mul", {half, Ints({1})});
  Value* e2 = Op("Mul", {half, Ints({2})});
  Value* a = Op("Slice", {x, Ints({0}), e1, Ints({1})});
  Value* b = Op("Slice", {x, e1, e2, Ints({1})});
  // A bound that is not known stays unknown.
  Value* unknown = g.AddValue("n");
  unknown->dtype = DataType::kInt64;
  unknown->shape = Shape::Static({1});
  g.inputs.push_back(unknown);
  Value* c = Op("Slice", {x, Ints({0}), unknown, Ints({1})});
  Infer(a);
  Infer(b);
  Infer(c);
  EXPECT_FALSE(c->shape.known_rank() && c->shape[1].is_static());
  EXPECT_EQ(a->shape.ToString(), "[batch,16,64]");
  EXPECT_EQ(b->shape.ToString(), "[batch,16,64]");
}

TEST_F(DimsValueTest, ExpandConstantOfShapeAndReduceToShapeReadTheNames) {
  Value* s = Op("Shape", {x});
  Value* c = Op("ConstantOfShape", {s});
  Value* ones = g.AddInitializer("ones", Tensor(DataType::kFloat32, {1, 1, 64}));
  Value* e = Op("Expand", {ones, s});
  Value* r = g.AddValue("r");
  g.AddNode("ReduceToShape", {e, s}, {r}, "rts")->domain = kInternalDomain;
  Infer(c);
  Infer(r);
  EXPECT_EQ(c->shape.ToString(), "[batch,32,64]");
  EXPECT_EQ(e->shape.ToString(), "[batch,32,64]");
  EXPECT_EQ(r->shape.ToString(), "[batch,32,64]");
}

TEST_F(DimsValueTest, NoNameWhereTheChainCannotBeFollowed) {
  // The index a graph input (unknown), a Cast to float and back, and the product of two sizes: the rank is
  // known, the dims are not.
  Value* i = g.AddValue("i");
  i->dtype = DataType::kInt64;
  i->shape = Shape::Scalar();
  g.inputs.push_back(i);
  Value* by_input = Op("Unsqueeze", {Op("Gather", {Op("Shape", {x}), i}), Ints({0})});
  Value* via_float =
      Op("Cast", {Op("Cast", {DimOf(x, 0)}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat32))}})},
         {{"to", Attribute::Int(static_cast<int64_t>(DataType::kInt64))}});
  Value* product = Op("Mul", {DimOf(x, 0), DimOf(x, 1)});
  Value* y1 = Op("Reshape", {x, Op("Concat", {by_input, Ints({-1})}, {{"axis", Attribute::Int(0)}})});
  Value* y2 = Op("Reshape", {x, Op("Concat", {via_float, Ints({-1})}, {{"axis", Attribute::Int(0)}})});
  Value* y3 = Op("Reshape", {x, Op("Concat", {product, Ints({64})}, {{"axis", Attribute::Int(0)}})});
  Infer(y1);
  Infer(y2);
  EXPECT_EQ(Infer(y3), "[?,64]");
  EXPECT_EQ(y1->shape.ToString(), "[?,?]");
  EXPECT_EQ(y2->shape.ToString(), "[?,?]");
}

TEST_F(DimsValueTest, ABadTargetIsStillReportedWithTheNode) {
  // [batch,32,64] cannot become [batch,3,-1]: 2048 elements per sample do not divide by 3.
  Value* y = Op("Reshape", {x, Op("Concat", {DimOf(x, 0), Ints({3, -1})}, {{"axis", Attribute::Int(0)}})});
  g.outputs.push_back(y);
  try {
    InferShapes(g, true);
    FAIL() << "accepted " << y->shape.ToString();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Reshape"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ot
