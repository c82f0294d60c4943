// Shape-family ops through the executor (test::RunOp) against references computed here, plus inference on
// symbolic shapes and the errors a user can cause.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "graph/error.h"
#include "graph/op_registry.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::RandomTensor;
using test::RunOp;

Attribute Ints(std::vector<int64_t> v) { return Attribute::Ints(std::move(v)); }
Attribute Int(int64_t v) { return Attribute::Int(v); }
Tensor I64(std::vector<int64_t> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return Tensor::FromInt64(v, {n});
}
Tensor Scalar64(int64_t v) { return Tensor::FromInt64({v}, {}); }

// Same bytes, same dims, same dtype.
void ExpectSame(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(DataTypeName(a.dtype()), DataTypeName(b.dtype()));
  ASSERT_EQ(DimsToString(a.dims()), DimsToString(b.dims()));
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.GetDouble(i), b.GetDouble(i)) << "element " << i;
}

std::vector<int64_t> Strides(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

TEST(ShapeOps, ReshapeZeroAndMinusOne) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3, 4});
  auto out = RunOp("Reshape", {x, I64({0, -1})}, {}, 1, 13, {1});
  ExpectSame(out[0], x.Reshaped({2, 12}));
  // The shape as a graph input (its value is known when the plan is made).
  out = RunOp("Reshape", {x, I64({-1, 2, 2})}, {}, 1, 13);
  ExpectSame(out[0], x.Reshaped({6, 2, 2}));
  // Opset 1..4: shape attribute.
  out = RunOp("Reshape", {x}, {{"shape", Ints({4, 0, -1})}}, 1, 4);
  ExpectSame(out[0], x.Reshaped({4, 3, 2}));
}

TEST(ShapeOps, ReshapeAllowZero) {
  Tensor x(DataType::kFloat32, {0, 3, 4});
  auto out = RunOp("Reshape", {x, I64({3, 4, 0})}, {{"allowzero", Int(1)}}, 1, 14, {1});
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{3, 4, 0}));
}

TEST(ShapeOps, ReshapeCountMismatchNamesNode) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3});
  try {
    RunOp("Reshape", {x, I64({4, 2})}, {}, 1, 13, {1});
    FAIL() << "expected an error";
  } catch (const UnsupportedError&) {
    FAIL() << "a shape mismatch is a user error, not unsupported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'node'"), std::string::npos) << e.what();
  }
}

// Inference on symbolic dims: Reshape cancels shared symbols, Shape knows its length, Flatten keeps symbols.
TEST(ShapeOps, SymbolicInference) {
  auto infer = [](const std::string& op, Shape in, std::vector<int64_t> target, std::map<std::string, Attribute> attrs,
                  int opset) {
    Graph g;
    g.opset_imports[""] = opset;
    Value* x = g.AddValue("x");
    x->dtype = DataType::kFloat32;
    x->shape = std::move(in);
    g.inputs.push_back(x);
    std::vector<Value*> ins{x};
    if (!target.empty()) ins.push_back(g.AddInitializer("s", I64(target)));
    Value* y = g.AddValue("y");
    g.outputs.push_back(y);
    Node* n = g.AddNode(op, ins, {y}, "n");
    n->opset = opset;
    n->attrs = std::move(attrs);
    InferShapes(g);
    return y->shape.ToString() + " " + DataTypeName(y->dtype);
  };
  const Shape bx({Dim::Symbol("batch"), Dim(3), Dim(4)});
  EXPECT_EQ(infer("Reshape", bx, {0, -1}, {}, 13), Shape({Dim::Symbol("batch"), Dim(12)}).ToString() + " float32");
  EXPECT_EQ(infer("Reshape", bx, {-1, 12}, {}, 13), Shape({Dim::Symbol("batch"), Dim(12)}).ToString() + " float32");
  EXPECT_EQ(infer("Reshape", bx, {-1, 4}, {}, 13), Shape({Dim(), Dim(4)}).ToString() + " float32");
  EXPECT_EQ(infer("Reshape", Shape(), {-1, 10}, {}, 13), Shape({Dim(), Dim(10)}).ToString() + " float32");
  EXPECT_EQ(infer("Shape", bx, {}, {}, 13), "[3] int64");
  EXPECT_EQ(infer("Shape", bx, {}, {{"start", Int(1)}}, 15), "[2] int64");
  EXPECT_EQ(infer("Flatten", bx, {}, {}, 13), Shape({Dim::Symbol("batch"), Dim(12)}).ToString() + " float32");
  EXPECT_EQ(infer("Transpose", bx, {}, {}, 13), Shape({Dim(4), Dim(3), Dim::Symbol("batch")}).ToString() + " float32");
  EXPECT_EQ(infer("Slice", bx, {}, {{"starts", Ints({1})}, {"ends", Ints({3})}, {"axes", Ints({-1})}}, 9),
            Shape({Dim::Symbol("batch"), Dim(3), Dim(2)}).ToString() + " float32");
}

TEST(ShapeOps, TransposeMatchesReference) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt64, DataType::kUint8}) {
    Tensor x = RandomTensor(t, {2, 3, 4, 5}, 0, 100);
    const std::vector<int64_t> perm{2, 0, 3, 1};
    auto out = RunOp("Transpose", {x}, {{"perm", Ints(perm)}});
    Tensor want(t, {4, 2, 5, 3});
    const auto is = Strides(x.dims());
    for (int64_t o = 0; o < want.numel(); ++o) {
      int64_t rem = o, off = 0;
      for (int k = 3; k >= 0; --k) {
        off += (rem % want.dims()[k]) * is[perm[k]];
        rem /= want.dims()[k];
      }
      want.SetDouble(o, x.GetDouble(off));
    }
    ExpectSame(out[0], want);
  }
  // Default perm reverses.
  Tensor x = RandomTensor(DataType::kFloat32, {3, 7});
  auto out = RunOp("Transpose", {x});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 7; ++j) ASSERT_EQ(out[0].GetDouble(j * 3 + i), x.GetDouble(i * 7 + j));
}

// numpy-style slice reference along one axis.
std::vector<int64_t> PySlice(int64_t d, int64_t s, int64_t e, int64_t st) {
  std::vector<int64_t> r;
  if (s < 0) s += d;
  if (e < 0) e += d;
  if (st > 0) {
    s = std::clamp<int64_t>(s, 0, d);
    e = std::clamp<int64_t>(e, 0, d);
    for (int64_t i = s; i < e; i += st) r.push_back(i);
  } else {
    s = std::clamp<int64_t>(s, -1, d - 1);
    e = std::clamp<int64_t>(e, -1, d - 1);
    for (int64_t i = s; i > e; i += st) r.push_back(i);
  }
  return r;
}

TEST(ShapeOps, SliceStepsAndClamping) {
  Tensor x = RandomTensor(DataType::kFloat32, {5, 6, 4});
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const std::vector<Case> cases{
      {{-1, 10}, {-100, -100}, {0, 1}, {-1, -2}},
      {{1, -3}, {1000, 6}, {2, 0}, {1, 2}},
      {{0}, {-1}, {-2}, {3}},
      {{4}, {1}, {1}, {1}},  // empty
  };
  for (const Case& c : cases) {
    auto out = RunOp("Slice", {x, I64(c.starts), I64(c.ends), I64(c.axes), I64(c.steps)}, {}, 1, 13);
    std::vector<std::vector<int64_t>> idx{{0, 1, 2, 3, 4}, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3}};
    for (size_t i = 0; i < c.axes.size(); ++i) {
      int64_t ax = c.axes[i] < 0 ? c.axes[i] + 3 : c.axes[i];
      idx[ax] = PySlice(x.dims()[ax], c.starts[i], c.ends[i], c.steps[i]);
    }
    std::vector<int64_t> od{(int64_t)idx[0].size(), (int64_t)idx[1].size(), (int64_t)idx[2].size()};
    ASSERT_EQ(out[0].dims(), od);
    int64_t o = 0;
    for (int64_t a : idx[0])
      for (int64_t b : idx[1])
        for (int64_t cc : idx[2]) ASSERT_EQ(out[0].GetDouble(o++), x.GetDouble((a * 6 + b) * 4 + cc));
  }
  // Opset 9: attributes, no steps.
  auto old = RunOp("Slice", {x}, {{"starts", Ints({1, -2})}, {"ends", Ints({3, 100})}, {"axes", Ints({0, 2})}}, 1, 9);
  ASSERT_EQ(old[0].dims(), (std::vector<int64_t>{2, 6, 2}));
  EXPECT_EQ(old[0].GetDouble(0), x.GetDouble((1 * 6 + 0) * 4 + 2));
}

TEST(ShapeOps, GatherNegativeAndOutOfRange) {
  Tensor x = RandomTensor(DataType::kFloat32, {3, 4});
  Tensor idx = Tensor::FromInt64({-1, 0, 2, -4}, {2, 2});
  auto out = RunOp("Gather", {x, idx}, {{"axis", Int(1)}});
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{3, 2, 2}));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      int64_t k = idx.GetInt64(j);
      EXPECT_EQ(out[0].GetDouble(i * 4 + j), x.GetDouble(i * 4 + (k < 0 ? k + 4 : k)));
    }
  Tensor bad = Tensor::FromInt64({0, 4}, {2});
  try {
    RunOp("Gather", {x, bad}, {{"axis", Int(1)}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'node'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("index 4"), std::string::npos) << e.what();
  }
}

TEST(ShapeOps, SplitOpsetVariants) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 7});
  auto out = RunOp("Split", {x}, {{"axis", Int(1)}, {"num_outputs", Int(3)}}, 3, 18);
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(out[2].dims(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(out[2].GetDouble(1), x.GetDouble(13));
  EXPECT_EQ(out[1].GetDouble(3), x.GetDouble(7 + 3 + 0));
  auto out11 = RunOp("Split", {x}, {{"axis", Int(-1)}, {"split", Ints({2, 5})}}, 2, 11);
  ASSERT_EQ(out11[1].dims(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(out11[1].GetDouble(5), x.GetDouble(7 + 2));
  auto out13 = RunOp("Split", {x, I64({5, 2})}, {{"axis", Int(1)}}, 2, 13, {1});
  EXPECT_EQ(out13[1].GetDouble(0), x.GetDouble(5));
  EXPECT_THROW(RunOp("Split", {x}, {{"axis", Int(1)}}, 2, 13), Error);  // 7 is not even
}

TEST(ShapeOps, SqueezeUnsqueezeAttributeAndInput) {
  Tensor x = RandomTensor(DataType::kInt32, {1, 3, 1, 2}, -50, 50);
  EXPECT_EQ(RunOp("Squeeze", {x}, {{"axes", Ints({0, -2})}}, 1, 11)[0].dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(RunOp("Squeeze", {x, I64({2})}, {}, 1, 13, {1})[0].dims(), (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(RunOp("Squeeze", {x}, {}, 1, 13)[0].dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_THROW(RunOp("Squeeze", {x, I64({1})}, {}, 1, 13, {1}), Error);  // dim 1 is 3
  auto u = RunOp("Unsqueeze", {x, I64({-1, 0})}, {}, 1, 13, {1});
  EXPECT_EQ(u[0].dims(), (std::vector<int64_t>{1, 1, 3, 1, 2, 1}));
  ExpectSame(u[0].Reshaped(x.dims()), x);
  EXPECT_EQ(RunOp("Unsqueeze", {x}, {{"axes", Ints({4})}}, 1, 11)[0].dims(), (std::vector<int64_t>{1, 3, 1, 2, 1}));
}

TEST(ShapeOps, ConcatAndErrors) {
  Tensor a = RandomTensor(DataType::kFloat64, {2, 1, 3}), b = RandomTensor(DataType::kFloat64, {2, 2, 3});
  auto out = RunOp("Concat", {a, b}, {{"axis", Int(-2)}});
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{2, 3, 3}));
  EXPECT_EQ(out[0].GetDouble(9 + 3 + 1), b.GetDouble(6 + 1));
  EXPECT_EQ(out[0].GetDouble(9), a.GetDouble(3));
  EXPECT_THROW(RunOp("Concat", {a, RandomTensor(DataType::kFloat64, {3, 1, 3})}, {{"axis", Int(1)}}), Error);
  EXPECT_THROW(RunOp("Concat", {a, RandomTensor(DataType::kFloat32, {2, 1, 3})}, {{"axis", Int(1)}}), Error);
}

TEST(ShapeOps, ExpandAndTile) {
  Tensor x = RandomTensor(DataType::kFloat32, {3, 1});
  auto e = RunOp("Expand", {x, I64({2, 1, 4})}, {}, 1, 13, {1});
  ASSERT_EQ(e[0].dims(), (std::vector<int64_t>{2, 3, 4}));
  for (int64_t i = 0; i < 24; ++i) ASSERT_EQ(e[0].GetDouble(i), x.GetDouble((i / 4) % 3));
  auto t = RunOp("Tile", {x, I64({2, 3})}, {}, 1, 13, {1});
  ASSERT_EQ(t[0].dims(), (std::vector<int64_t>{6, 3}));
  for (int64_t i = 0; i < 18; ++i) ASSERT_EQ(t[0].GetDouble(i), x.GetDouble((i / 3) % 3));
  EXPECT_THROW(RunOp("Expand", {x, I64({2, 4})}, {}, 1, 13, {1}), Error);  // 3 vs 2... does not broadcast
}

TEST(ShapeOps, PadModes) {
  Tensor x = Tensor::FromFloat({1, 2, 3, 4, 5, 6}, {2, 3});
  auto c = RunOp("Pad", {x, I64({0, 1, 1, 0}), Tensor::Scalar(9.f)}, {}, 1, 13, {1});
  EXPECT_EQ(c[0].ToInt64Vector(), (std::vector<int64_t>{9, 1, 2, 3, 9, 4, 5, 6, 9, 9, 9, 9}));
  auto r = RunOp("Pad", {x, I64({0, 2, 0, 1})}, {{"mode", Attribute::String("reflect")}}, 1, 13, {1});
  EXPECT_EQ(r[0].ToInt64Vector(), (std::vector<int64_t>{3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}));
  auto w = RunOp("Pad", {x, I64({1, 1}), Tensor(), I64({-1})}, {{"mode", Attribute::String("wrap")}}, 1, 19, {1, 3});
  EXPECT_EQ(w[0].ToInt64Vector(), (std::vector<int64_t>{3, 1, 2, 3, 1, 6, 4, 5, 6, 4}));
  auto old = RunOp("Pad", {x}, {{"pads", Ints({1, 0, 0, 0})}, {"value", Attribute::Float(-1.f)}}, 1, 2);
  EXPECT_EQ(old[0].ToInt64Vector(), (std::vector<int64_t>{-1, -1, -1, 1, 2, 3, 4, 5, 6}));
  auto edge = RunOp("Pad", {x, I64({0, 0, 2, 0})}, {{"mode", Attribute::String("edge")}}, 1, 13, {1});
  EXPECT_EQ(edge[0].ToInt64Vector(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 4, 5, 6, 4, 5, 6}));
}

TEST(ShapeOps, ScatterElementsAddAndBadIndex) {
  Tensor data = RandomTensor(DataType::kFloat32, {3, 3});
  Tensor idx = Tensor::FromInt64({1, 1, -1}, {1, 3});
  Tensor upd = RandomTensor(DataType::kFloat32, {1, 3});
  auto out =
      RunOp("ScatterElements", {data, idx, upd}, {{"axis", Int(1)}, {"reduction", Attribute::String("add")}}, 1, 16);
  Tensor want = data.Clone();
  for (int j = 0; j < 3; ++j) {
    int64_t k = idx.GetInt64(j) < 0 ? idx.GetInt64(j) + 3 : idx.GetInt64(j);
    want.SetDouble(k, want.GetDouble(k) + upd.GetDouble(j));
  }
  test::ExpectClose(out[0], want);
  Tensor bad = Tensor::FromInt64({0, 3, 0}, {1, 3});
  EXPECT_THROW(RunOp("ScatterElements", {data, bad, upd}, {{"axis", Int(1)}}, 1, 16), Error);
}

TEST(ShapeOps, TopK) {
  Tensor x = Tensor::FromFloat({3, 1, 3, 2, 5, 0}, {2, 3});
  auto out = RunOp("TopK", {x, I64({2})}, {{"axis", Int(1)}}, 2, 11, {1});
  EXPECT_EQ(out[0].ToInt64Vector(), (std::vector<int64_t>{3, 3, 5, 2}));
  EXPECT_EQ(out[1].ToInt64Vector(), (std::vector<int64_t>{0, 2, 1, 0}));  // ties: lower index first
  auto small = RunOp("TopK", {x, I64({1})}, {{"axis", Int(0)}, {"largest", Int(0)}}, 2, 11, {1});
  EXPECT_EQ(small[0].ToInt64Vector(), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(small[1].ToInt64Vector(), (std::vector<int64_t>{1, 0, 1}));
}

TEST(ShapeOps, DepthToSpaceMatchesDefinition) {
  Tensor x = RandomTensor(DataType::kFloat32, {1, 8, 2, 3});
  for (const char* mode : {"DCR", "CRD"}) {
    auto out = RunOp("DepthToSpace", {x}, {{"blocksize", Int(2)}, {"mode", Attribute::String(mode)}});
    ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{1, 2, 4, 6}));
    for (int c = 0; c < 2; ++c)
      for (int h = 0; h < 4; ++h)
        for (int w = 0; w < 6; ++w) {
          int bh = h % 2, bw = w % 2;
          int ic = std::string(mode) == "DCR" ? (bh * 2 + bw) * 2 + c : c * 4 + bh * 2 + bw;
          ASSERT_EQ(out[0].GetDouble((c * 4 + h) * 6 + w), x.GetDouble((ic * 2 + h / 2) * 3 + w / 2));
        }
    auto back = RunOp("SpaceToDepth", {out[0]}, {{"blocksize", Int(2)}});
    if (std::string(mode) == "DCR") ExpectSame(back[0], x);
  }
}

TEST(ShapeOps, Generators) {
  auto r =
      RunOp("Range", {Tensor::FromInt64({10}, {}), Tensor::FromInt64({1}, {}), Tensor::FromInt64({-3}, {})}, {}, 1, 11);
  EXPECT_EQ(r[0].ToInt64Vector(), (std::vector<int64_t>{10, 7, 4}));
  auto rf = RunOp("Range", {Tensor::Scalar(0.5f), Tensor::Scalar(2.f), Tensor::Scalar(0.5f)}, {}, 1, 11);
  EXPECT_EQ(rf[0].dims(), (std::vector<int64_t>{3}));
  EXPECT_EQ(rf[0].GetDouble(2), 1.5);

  Tensor v = Tensor::FromInt64({7}, {1});
  auto c = RunOp("ConstantOfShape", {I64({2, 3})}, {{"value", Attribute::TensorValue(v)}}, 1, 13);
  EXPECT_EQ(c[0].ToInt64Vector(), std::vector<int64_t>(6, 7));
  EXPECT_EQ(c[0].dtype(), DataType::kInt64);

  auto k = RunOp("Constant", {}, {{"value_ints", Ints({4, 5})}}, 1, 13);
  EXPECT_EQ(k[0].ToInt64Vector(), (std::vector<int64_t>{4, 5}));
  EXPECT_THROW(RunOp("Constant", {}, {{"value_string", Attribute::String("a")}}, 1, 13), UnsupportedError);

  auto eye = RunOp("EyeLike", {Tensor(DataType::kInt32, {2, 3})}, {{"k", Int(1)}, {"dtype", Int(1)}}, 1, 13);
  EXPECT_EQ(eye[0].dtype(), DataType::kFloat32);
  EXPECT_EQ(eye[0].ToInt64Vector(), (std::vector<int64_t>{0, 1, 0, 0, 0, 1}));

  Tensor ind = Tensor::FromInt64({1, -1, 5}, {3});
  auto oh = RunOp("OneHot", {ind, Scalar64(3), Tensor::FromFloat({0, 2}, {2})}, {{"axis", Int(0)}}, 1, 11, {1});
  ASSERT_EQ(oh[0].dims(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(oh[0].ToInt64Vector(), (std::vector<int64_t>{0, 0, 0, 2, 0, 0, 0, 2, 0}));

  Tensor m = RandomTensor(DataType::kFloat32, {2, 3, 4});
  auto tu = RunOp("Trilu", {m, Scalar64(-1)}, {{"upper", Int(0)}}, 1, 14);
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) {
        int64_t o = (b * 3 + i) * 4 + j;
        ASSERT_EQ(tu[0].GetDouble(o), j - i <= -1 ? m.GetDouble(o) : 0.0);
      }
}

TEST(ShapeOps, ShapeAndSize) {
  Tensor x(DataType::kFloat16, {2, 3, 5});
  EXPECT_EQ(RunOp("Shape", {x}, {{"start", Int(-2)}}, 1, 15)[0].ToInt64Vector(), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(RunOp("Shape", {x})[0].ToInt64Vector(), (std::vector<int64_t>{2, 3, 5}));
  auto s = RunOp("Size", {x});
  EXPECT_EQ(s[0].dims(), std::vector<int64_t>{});
  EXPECT_EQ(s[0].GetInt64(0), 30);
}

TEST(ShapeOps, GatherElementsAndGatherND) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3});
  Tensor idx = Tensor::FromInt64({2, -3, 1, 1}, {2, 2});
  auto ge = RunOp("GatherElements", {x, idx}, {{"axis", Int(1)}});
  EXPECT_EQ(ge[0].GetDouble(0), x.GetDouble(2));
  EXPECT_EQ(ge[0].GetDouble(1), x.GetDouble(0));
  EXPECT_EQ(ge[0].GetDouble(3), x.GetDouble(4));
  auto nd = RunOp("GatherND", {x, Tensor::FromInt64({1, 0, 0, 2}, {2, 2})}, {}, 1, 13);
  EXPECT_EQ(nd[0].dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ(nd[0].GetDouble(0), x.GetDouble(3));
  EXPECT_EQ(nd[0].GetDouble(1), x.GetDouble(2));
  EXPECT_THROW(RunOp("GatherND", {x, Tensor::FromInt64({2, 0}, {1, 2})}, {}, 1, 13), Error);
}

}  // namespace
}  // namespace ot
