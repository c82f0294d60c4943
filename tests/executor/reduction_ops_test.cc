// Reduction family through the executor (test::RunOp): axes as attribute (opset 13) and as input (ReduceSum 13,
// all from 18), keepdims, noop_with_empty_axes, negative axes, ArgMax/ArgMin, CumSum with a runtime axis, and
// errors naming the node.
#include <cmath>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::ExpectClose;
using test::RandomTensor;
using test::RunOp;

// Naive reduction in double: axes (normalised), keepdims layout then squeezed.
Tensor RefReduce(const std::string& op, const Tensor& x, std::vector<int64_t> axes, bool keepdims) {
  const auto& dims = x.dims();
  const int rank = x.rank();
  std::vector<bool> red(rank, axes.empty());
  for (int64_t a : axes) red[a < 0 ? a + rank : a] = true;
  std::vector<int64_t> kd, od;
  for (int d = 0; d < rank; ++d) {
    kd.push_back(red[d] ? 1 : dims[d]);
    if (!red[d] || keepdims) od.push_back(red[d] ? 1 : dims[d]);
  }
  const int64_t on = NumElements(kd);
  std::vector<std::vector<double>> groups(on);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t r = i, o = 0, s = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t idx = r % dims[d];
      r /= dims[d];
      if (!red[d]) o += idx * s;
      s *= kd[d];
    }
    groups[o].push_back(x.GetDouble(i));
  }
  Tensor y(x.dtype(), od);
  for (int64_t o = 0; o < on; ++o) {
    const auto& g = groups[o];
    double a = 0;
    if (op == "ReduceSum")
      for (double v : g) a += v;
    else if (op == "ReduceMean") {
      for (double v : g) a += v;
      a /= g.size();
    } else if (op == "ReduceMax") {
      a = -INFINITY;
      for (double v : g) a = std::max(a, v);
    } else if (op == "ReduceMin") {
      a = INFINITY;
      for (double v : g) a = std::min(a, v);
    } else if (op == "ReduceProd") {
      a = 1;
      for (double v : g) a *= v;
    } else if (op == "ReduceL1")
      for (double v : g) a += std::fabs(v);
    else if (op == "ReduceL2") {
      for (double v : g) a += v * v;
      a = std::sqrt(a);
    } else if (op == "ReduceLogSum") {
      for (double v : g) a += v;
      a = std::log(a);
    } else if (op == "ReduceLogSumExp") {
      for (double v : g) a += std::exp(v);
      a = std::log(a);
    } else if (op == "ReduceSumSquare")
      for (double v : g) a += v * v;
    y.SetDouble(o, a);
  }
  return y;
}

const char* const kOps[] = {"ReduceSum", "ReduceMean", "ReduceMax",    "ReduceMin",       "ReduceProd",
                            "ReduceL1",  "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};

TEST(ReductionOps, AxesAttributeAtOpset13) {
  for (const char* op : kOps) {
    if (std::string(op) == "ReduceSum") continue;  // axes is an input from opset 13
    for (bool keep : {true, false}) {
      Tensor x = RandomTensor(DataType::kFloat32, {3, 4, 5}, 0.5, 1.5);
      auto y = RunOp(op, {x}, {{"axes", Attribute::Ints({0, -1})}, {"keepdims", Attribute::Int(keep)}}, 1, 13);
      ExpectClose(y[0], RefReduce(op, x, {0, -1}, keep), 1e-5, 1e-6);
    }
  }
}

TEST(ReductionOps, AxesInputAtOpset18AndReduceSum13) {
  for (const char* op : kOps) {
    const int opset = std::string(op) == "ReduceSum" ? 13 : 18;
    Tensor x = RandomTensor(DataType::kFloat32, {2, 3, 4}, 0.5, 1.5);
    Tensor axes = Tensor::FromInt64({1}, {1});
    auto y = RunOp(op, {x, axes}, {{"keepdims", Attribute::Int(0)}}, 1, opset, {1});
    ExpectClose(y[0], RefReduce(op, x, {1}, false), 1e-5, 1e-6);
    // Axes fed as a graph input: its value is part of the plan.
    auto z = RunOp(op, {x, axes}, {}, 1, opset);
    ExpectClose(z[0], RefReduce(op, x, {1}, true), 1e-5, 1e-6);
  }
}

TEST(ReductionOps, DefaultAxesReduceAllAndNoopWithEmptyAxes) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3, 4});
  auto all = RunOp("ReduceMean", {x}, {}, 1, 13);
  ExpectClose(all[0], RefReduce("ReduceMean", x, {}, true), 1e-5, 1e-6);
  EXPECT_EQ(all[0].dims(), (std::vector<int64_t>{1, 1, 1}));
  Tensor empty_axes = Tensor::FromInt64({}, {0});
  auto noop = RunOp("ReduceSum", {x, empty_axes}, {{"noop_with_empty_axes", Attribute::Int(1)}}, 1, 13, {1});
  ExpectClose(noop[0], x, 0, 0);
  auto sum_all = RunOp("ReduceSum", {x, empty_axes}, {{"keepdims", Attribute::Int(0)}}, 1, 13, {1});
  ExpectClose(sum_all[0], RefReduce("ReduceSum", x, {}, false), 1e-5, 1e-6);
  EXPECT_EQ(sum_all[0].rank(), 0);
}

TEST(ReductionOps, IntegerAndDoubleDtypes) {
  Tensor xi = RandomTensor(DataType::kInt64, {4, 6}, -50, 50);
  auto y = RunOp("ReduceMax", {xi}, {{"axes", Attribute::Ints({1})}}, 1, 13);
  ExpectClose(y[0], RefReduce("ReduceMax", xi, {1}, true), 0, 0);
  Tensor xd = RandomTensor(DataType::kFloat64, {5, 7});
  auto z = RunOp("ReduceSumSquare", {xd}, {{"axes", Attribute::Ints({0})}}, 1, 13);
  ExpectClose(z[0], RefReduce("ReduceSumSquare", xd, {0}, true), 1e-12, 1e-12);
}

TEST(ReductionOps, BadAxisFailsNamingTheNode) {
  Tensor x = RandomTensor(DataType::kFloat32, {2, 3});
  try {
    RunOp("ReduceMean", {x}, {{"axes", Attribute::Ints({2})}}, 1, 13);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("axis 2"), std::string::npos) << e.what();
  }
}

TEST(ReductionOps, ArgMaxArgMinShapesAndValues) {
  Tensor x = RandomTensor(DataType::kFloat32, {3, 5, 2});
  for (const char* op : {"ArgMax", "ArgMin"}) {
    auto y = RunOp(op, {x}, {{"axis", Attribute::Int(-2)}, {"keepdims", Attribute::Int(0)}}, 1, 13);
    ASSERT_EQ(y[0].dtype(), DataType::kInt64);
    ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{3, 2}));
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) {
        int best = 0;
        for (int k = 1; k < 5; ++k) {
          double v = x.GetDouble((i * 5 + k) * 2 + j), b = x.GetDouble((i * 5 + best) * 2 + j);
          if (std::string(op) == "ArgMax" ? v > b : v < b) best = k;
        }
        EXPECT_EQ(y[0].GetInt64(i * 2 + j), best);
      }
  }
}

TEST(ReductionOps, CumSumAxisFromInput) {
  Tensor x = RandomTensor(DataType::kFloat32, {3, 4});
  Tensor axis = Tensor::FromInt64({-1}, {});
  auto y = RunOp("CumSum", {x, axis}, {{"reverse", Attribute::Int(1)}}, 1, 14);
  Tensor e(DataType::kFloat32, {3, 4});
  for (int i = 0; i < 3; ++i) {
    double acc = 0;
    for (int j = 3; j >= 0; --j) {
      acc += x.GetDouble(i * 4 + j);
      e.SetDouble(i * 4 + j, acc);
    }
  }
  ExpectClose(y[0], e, 1e-6, 1e-6);
}

// ai.onnxtrain.ReduceToShape (the autodiff's undo of broadcasting) against a float64 sum on fresh inputs: whole
// leading axes reduced (a bias gradient, the row-streaming path, with more columns than one block and odd sizes),
// middle axes reduced with leading and trailing ones kept (a channels-last squeeze-and-excite gradient, [N, H, W, C]
// -> [N, 1, 1, C]: per image, with column blocks and a single column), a reduction over inner axes (the general
// path), and the same shape (a copy).
TEST(ReduceToShapeKernel, MatchesAFloat64SumForEveryShapeKind) {
  struct Case {
    std::vector<int64_t> in, out;
  };
  for (const Case& c :
       {Case{{3, 37, 1030}, {1030}}, Case{{5, 7, 9}, {1, 7, 9}}, Case{{4, 6, 8}, {4, 1, 8}}, Case{{2, 3}, {2, 3}},
        Case{{600, 3}, {3}}, Case{{4, 7, 5, 600}, {4, 1, 1, 600}}, Case{{3, 4, 5, 6}, {3, 1, 1, 1}},
        Case{{2, 9, 1, 5}, {2, 1, 1, 5}}, Case{{1, 6, 6, 8}, {1, 1, 1, 8}}, Case{{3, 5, 2}, {5, 1}}}) {
    SCOPED_TRACE(DimsToString(c.in) + " -> " + DimsToString(c.out));
    Graph g;
    g.opset_imports[""] = 17;
    g.opset_imports[kInternalDomain] = 1;
    Value* x = g.AddValue("x");
    x->dtype = DataType::kFloat32;
    x->shape = Shape::Static(c.in);
    g.inputs.push_back(x);
    Value* shape = g.AddInitializer("shape", Tensor::FromInt64(c.out, {static_cast<int64_t>(c.out.size())}));
    Value* y = g.AddValue("y");
    Node* n = g.AddNode("ReduceToShape", {x, shape}, {y}, "r");
    n->domain = kInternalDomain;
    n->opset = 1;
    g.outputs.push_back(y);
    InferShapes(g);
    const Tensor xt = RandomTensor(DataType::kFloat32, c.in, -2, 2);
    Executor ex(g);
    const Tensor got = ex.Run({{"x", xt}})[0];
    // Reference: every input element added (in double) to the output element it broadcasts from.
    Tensor want(DataType::kFloat32, c.out);
    std::vector<double> acc(static_cast<size_t>(want.numel()), 0.0);
    const size_t r = c.in.size(), ro = c.out.size();
    std::vector<int64_t> idx(r, 0);
    for (int64_t i = 0; i < xt.numel(); ++i) {
      int64_t rem = i, o = 0, stride = 1;
      for (size_t d = r; d-- > 0;) {
        idx[d] = rem % c.in[d];
        rem /= c.in[d];
      }
      for (size_t d = ro; d-- > 0;) {
        const int64_t od = c.out[d] == 1 ? 0 : idx[r - ro + d];
        o += od * stride;
        stride *= c.out[d];
      }
      acc[static_cast<size_t>(o)] += static_cast<double>(xt.data<float>()[i]);
    }
    for (int64_t j = 0; j < want.numel(); ++j) want.data<float>()[j] = static_cast<float>(acc[static_cast<size_t>(j)]);
    ExpectClose(got, want, 1e-6, 1e-5);
  }
}

}  // namespace
}  // namespace ot
