// Elementwise ops through the executor (schema inference + kernel factory + cpu_ops kernel), against naive double
// references on random inputs: broadcasting, opset-6 broadcast attributes, dtypes, attributes, Cast, Clip,
// Dropout modes, and the errors a user can cause.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::ExpectClose;
using test::RandomTensor;
using test::RunOp;

int64_t Offset(int64_t i, const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  int64_t off = 0, stride = 1;
  for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
    int64_t idx = i % out[d];
    i /= out[d];
    int k = d - static_cast<int>(out.size() - in.size());
    if (k >= 0) {
      if (in[k] != 1) off += idx * stride;
      stride *= in[k];
    }
  }
  return off;
}

// out[i] = f(a[.], b[.]) with b's dims `bd` broadcast to `od`, computed in double, stored as `t`.
Tensor RefBinary(const Tensor& a, const Tensor& b, const std::vector<int64_t>& bd, const std::vector<int64_t>& od,
                 DataType t, const std::function<double(double, double)>& f) {
  Tensor r(t, od);
  for (int64_t i = 0; i < r.numel(); ++i)
    r.SetDouble(i, f(a.GetDouble(Offset(i, a.dims(), od)), b.GetDouble(Offset(i, bd, od))));
  return r;
}

TEST(ElementwiseOps, AddSubMulDivBroadcastFloatAndInt) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64}) {
    Tensor a = RandomTensor(t, {2, 3, 4}, -20, 20);
    Tensor b = RandomTensor(t, {3, 1}, 1, 9);
    const std::vector<std::pair<std::string, std::function<double(double, double)>>> ops = {
        {"Add", [](double x, double y) { return x + y; }},
        {"Sub", [](double x, double y) { return x - y; }},
        {"Mul", [](double x, double y) { return x * y; }},
        {"Div", [t](double x, double y) { return IsFloat(t) ? x / y : std::trunc(x / y); }},
    };
    for (const auto& [op, f] : ops) {
      auto out = RunOp(op, {a, b});
      ExpectClose(out[0], RefBinary(a, b, b.dims(), {2, 3, 4}, t, f));
    }
  }
}

TEST(ElementwiseOps, HalfTypesComputeInFloat) {
  Tensor a = RandomTensor(DataType::kFloat16, {5, 7}, -3, 3);
  Tensor b = RandomTensor(DataType::kFloat16, {7}, -3, 3);
  auto out = RunOp("Mul", {a, b});
  ExpectClose(out[0], RefBinary(a, b, b.dims(), {5, 7}, DataType::kFloat16, [](double x, double y) { return x * y; }),
              1e-3, 1e-3);
  Tensor x = RandomTensor(DataType::kBFloat16, {64}, -3, 3);
  auto y = RunOp("Tanh", {x});
  Tensor want(DataType::kBFloat16, {64});
  for (int i = 0; i < 64; ++i) want.SetDouble(i, std::tanh(x.GetDouble(i)));
  ExpectClose(y[0], want, 1e-2, 1e-2);
}

TEST(ElementwiseOps, Opset6BroadcastAlignsBAtAxis) {
  Tensor a = RandomTensor(DataType::kFloat32, {2, 3, 4});
  Tensor b = RandomTensor(DataType::kFloat32, {3});
  auto out = RunOp("Add", {a, b}, {{"broadcast", Attribute::Int(1)}, {"axis", Attribute::Int(1)}}, 1, 6);
  ExpectClose(out[0], RefBinary(a, b, {3, 1}, {2, 3, 4}, DataType::kFloat32, [](double x, double y) { return x + y; }));
  // Default axis: B aligned with A's trailing dims.
  Tensor c = RandomTensor(DataType::kFloat32, {3, 4});
  out = RunOp("Mul", {a, c}, {{"broadcast", Attribute::Int(1)}}, 1, 6);
  ExpectClose(out[0], RefBinary(a, c, {3, 4}, {2, 3, 4}, DataType::kFloat32, [](double x, double y) { return x * y; }));
  // Without broadcast=1 the shapes must be equal.
  EXPECT_THROW(RunOp("Add", {a, c}, {}, 1, 6), Error);
}

TEST(ElementwiseOps, ShapeMismatchNamesTheNode) {
  Tensor a = RandomTensor(DataType::kFloat32, {2, 3});
  Tensor b = RandomTensor(DataType::kFloat32, {4});
  try {
    RunOp("Add", {a, b});
    FAIL() << "expected an error";
  } catch (const UnsupportedError&) {
    FAIL() << "a shape mismatch is a user error, not unsupported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Add"), std::string::npos) << e.what();
  }
}

TEST(ElementwiseOps, ComparisonsAndLogicGiveBool) {
  Tensor a = RandomTensor(DataType::kInt32, {3, 4}, -3, 3);
  Tensor b = RandomTensor(DataType::kInt32, {4}, -3, 3);
  auto out = RunOp("LessOrEqual", {a, b});
  ExpectClose(out[0], RefBinary(a, b, b.dims(), {3, 4}, DataType::kBool, [](double x, double y) { return x <= y; }));
  Tensor p = RandomTensor(DataType::kBool, {3, 4}, 0, 2), q = RandomTensor(DataType::kBool, {1, 4}, 0, 2);
  out = RunOp("Xor", {p, q});
  ExpectClose(out[0], RefBinary(p, q, q.dims(), {3, 4}, DataType::kBool, [](double x, double y) { return x != y; }));
  out = RunOp("Not", {p});
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out[0].GetDouble(i), 1 - p.GetDouble(i));
}

TEST(ElementwiseOps, ModPowBitShiftAndWhere) {
  Tensor a = Tensor::FromInt64({7, -7, 7, -7}, {4});
  Tensor b = Tensor::FromInt64({3, 3, -3, -3}, {4});
  auto out = RunOp("Mod", {a, b});
  EXPECT_EQ(out[0].ToInt64Vector(), (std::vector<int64_t>{1, 2, -2, -1}));
  out = RunOp("Mod", {a, b}, {{"fmod", Attribute::Int(1)}});
  EXPECT_EQ(out[0].ToInt64Vector(), (std::vector<int64_t>{1, -1, 1, -1}));

  Tensor base = RandomTensor(DataType::kFloat32, {2, 3}, 0.5, 2);
  Tensor ex = Tensor::FromInt64({2, 3, -1}, {3}).CastTo(DataType::kInt32);
  out = RunOp("Pow", {base, ex}, {}, 1, 15);
  ExpectClose(out[0], RefBinary(base, ex, ex.dims(), {2, 3}, DataType::kFloat32,
                                [](double x, double y) { return std::pow(x, y); }));

  Tensor u = Tensor::FromInt64({16, 1, 255}, {3}).CastTo(DataType::kUint8);
  Tensor s = Tensor::FromInt64({2, 7, 9}, {3}).CastTo(DataType::kUint8);
  out = RunOp("BitShift", {u, s}, {{"direction", Attribute::String("RIGHT")}}, 1, 11);
  EXPECT_EQ(out[0].ToInt64Vector(), (std::vector<int64_t>{4, 0, 0}));
  EXPECT_THROW(RunOp("BitShift", {u, s}, {{"direction", Attribute::String("UP")}}, 1, 11), Error);

  Tensor c = RandomTensor(DataType::kBool, {4, 1}, 0, 2);
  Tensor x = RandomTensor(DataType::kFloat64, {3});
  Tensor y = RandomTensor(DataType::kFloat64, {4, 3});
  out = RunOp("Where", {c, x, y});
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{4, 3}));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(out[0].GetDouble(i * 3 + j), c.GetDouble(i) ? x.GetDouble(j) : y.GetDouble(i * 3 + j));
}

TEST(ElementwiseOps, VariadicAndPRelu) {
  Tensor a = RandomTensor(DataType::kFloat32, {2, 3}), b = RandomTensor(DataType::kFloat32, {3}),
         c = RandomTensor(DataType::kFloat32, {2, 1});
  auto out = RunOp("Mean", {a, b, c});
  auto ab = RefBinary(a, b, b.dims(), {2, 3}, DataType::kFloat64, [](double x, double y) { return x + y; });
  ExpectClose(out[0],
              RefBinary(ab, c, c.dims(), {2, 3}, DataType::kFloat32, [](double x, double y) { return (x + y) / 3; }));
  Tensor i1 = RandomTensor(DataType::kUint16, {4}, 0, 100), i2 = RandomTensor(DataType::kUint16, {4}, 0, 100);
  out = RunOp("Min", {i1, i2});
  ExpectClose(out[0],
              RefBinary(i1, i2, i2.dims(), {4}, DataType::kUint16, [](double x, double y) { return std::min(x, y); }));
  EXPECT_THROW(RunOp("Sum", {i1, i2}), UnsupportedError);

  Tensor x = RandomTensor(DataType::kFloat32, {2, 3, 4});
  Tensor slope = RandomTensor(DataType::kFloat32, {3}, 0, 1);
  // Opset 6: a per-channel slope applies along dim 1.
  out = RunOp("PRelu", {x, slope}, {}, 1, 6);
  ExpectClose(out[0], RefBinary(x, slope, {3, 1}, {2, 3, 4}, DataType::kFloat32,
                                [](double v, double s) { return v < 0 ? v * s : v; }));
  Tensor slope4 = RandomTensor(DataType::kFloat32, {4}, 0, 1);
  out = RunOp("PRelu", {x, slope4}, {}, 1, 16);
  ExpectClose(out[0], RefBinary(x, slope4, {4}, {2, 3, 4}, DataType::kFloat32,
                                [](double v, double s) { return v < 0 ? v * s : v; }));
  EXPECT_THROW(RunOp("PRelu", {x, slope}, {}, 1, 16), Error);  // [3] does not broadcast to [2,3,4]
}

TEST(ElementwiseOps, ActivationAttributesAndGelu) {
  Tensor x = RandomTensor(DataType::kFloat32, {100}, -4, 4);
  auto check = [&](const std::string& op, const std::map<std::string, Attribute>& attrs, int opset,
                   const std::function<double(double)>& f) {
    auto out = RunOp(op, {x}, attrs, 1, opset);
    Tensor want(DataType::kFloat32, {100});
    for (int i = 0; i < 100; ++i) want.SetDouble(i, f(x.GetDouble(i)));
    ExpectClose(out[0], want, 1e-5, 1e-6);
  };
  check("LeakyRelu", {{"alpha", Attribute::Float(0.25f)}}, 16, [](double v) { return v < 0 ? 0.25 * v : v; });
  check("Elu", {}, 6, [](double v) { return v < 0 ? std::exp(v) - 1 : v; });
  check("HardSigmoid", {{"alpha", Attribute::Float(0.5f)}}, 6,
        [](double v) { return std::max(0.0, std::min(1.0, 0.5 * v + 0.5)); });
  check("Celu", {{"alpha", Attribute::Float(2.f)}}, 12,
        [](double v) { return std::max(0.0, v) + std::min(0.0, 2 * (std::exp(v / 2) - 1)); });
  check("ThresholdedRelu", {{"alpha", Attribute::Float(0.5f)}}, 10, [](double v) { return v > 0.5 ? v : 0; });
  check("Gelu", {}, 20, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); });
  check("Gelu", {{"approximate", Attribute::String("tanh")}}, 20,
        [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); });
  check("Round", {}, 11, [](double v) { return std::nearbyint(static_cast<float>(v)); });
  EXPECT_THROW(RunOp("Sin", {Tensor::FromInt64({1, 2}, {2})}), UnsupportedError);
}

// The internal GeluGrad kernel (erf form, then tanh), run through test::RunOp's domain argument, against the float64
// formula dY (Phi(x) + x phi(x)) on fresh inputs; bound: 8 eps of the terms' size (1 and erf counted apart)
// (kernel_common/vec_math.h's single-branch cdf; tests/cpu_ops/vec_math_test.cc has the exhaustive check).
TEST(ElementwiseOps, InternalGeluGradMatchesFloat64) {
  const Tensor dy = test::RandomTensor(DataType::kFloat32, {37, 129}, -2, 2);
  const Tensor x = test::RandomTensor(DataType::kFloat32, {37, 129}, -6, 6);
  const std::vector<Tensor> out = test::RunOp("GeluGrad", {dy, x}, {}, 1, 17, {}, nullptr, kInternalDomain);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].dims(), x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.GetDouble(i), d = dy.GetDouble(i);
    const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0)), pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    const double terms = std::fabs(d) * (0.5 * (1 + std::fabs(2 * cdf - 1)) + std::fabs(v) * pdf) + 1e-30;
    ASSERT_NEAR(out[0].GetDouble(i), d * (cdf + v * pdf), 8 * std::ldexp(terms, -24)) << "element " << i;
  }
  // The tanh form: dY ((1 + t) / 2 + x (1 - t^2) k (1 + 3 a x^2) / 2), t = tanh(k (x + a x^3)).
  const std::vector<Tensor> th = test::RunOp("GeluGrad", {dy, x}, {{"approximate", Attribute::String("tanh")}}, 1, 17,
                                             {}, nullptr, kInternalDomain);
  const double k = std::sqrt(2 / M_PI), a = 0.044715;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.GetDouble(i), d = dy.GetDouble(i), t = std::tanh(k * (v + a * v * v * v));
    const double want = d * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * a * v * v));
    ASSERT_NEAR(th[0].GetDouble(i), want, 1e-5 * std::fabs(d) * (1 + std::fabs(v))) << "element " << i;
  }
}

TEST(ElementwiseOps, CastAndClip) {
  Tensor x = Tensor::FromFloat({1.9f, -1.9f, 2.5f, -0.4f}, {4});
  auto out = RunOp("Cast", {x}, {{"to", Attribute::Int(static_cast<int>(DataType::kInt32))}});
  EXPECT_EQ(out[0].dtype(), DataType::kInt32);
  EXPECT_EQ(out[0].ToInt64Vector(), (std::vector<int64_t>{1, -1, 2, 0}));
  out = RunOp("Cast", {x}, {{"to", Attribute::Int(static_cast<int>(DataType::kBFloat16))}});
  ExpectClose(out[0], x.CastTo(DataType::kBFloat16), 0, 0);
  EXPECT_THROW(RunOp("Cast", {x}, {{"to", Attribute::Int(static_cast<int>(DataType::kString))}}), UnsupportedError);
  Tensor like(DataType::kFloat64, {1});
  out = RunOp("CastLike", {x, like}, {}, 1, 15);
  ExpectClose(out[0], x.CastTo(DataType::kFloat64), 0, 0);

  Tensor v = RandomTensor(DataType::kFloat32, {50}, -3, 3);
  Tensor want(DataType::kFloat32, {50});
  for (int i = 0; i < 50; ++i) want.SetDouble(i, std::min(1.0, std::max(-0.5, v.GetDouble(i))));
  out = RunOp("Clip", {v}, {{"min", Attribute::Float(-0.5f)}, {"max", Attribute::Float(1.f)}}, 1, 6);
  ExpectClose(out[0], want, 0, 0);
  Tensor lo(DataType::kFloat32, {}), hi(DataType::kFloat32, {});
  lo.SetDouble(0, -0.5);
  hi.SetDouble(0, 1.0);
  out = RunOp("Clip", {v, lo, hi}, {}, 1, 13);
  ExpectClose(out[0], want, 0, 0);
  out = RunOp("Clip", {v, Tensor(), hi}, {}, 1, 13);  // min omitted
  for (int i = 0; i < 50; ++i) EXPECT_EQ(out[0].GetDouble(i), std::min(1.0, v.GetDouble(i)));
  Tensor bad(DataType::kFloat32, {2});
  EXPECT_THROW(RunOp("Clip", {v, bad}, {}, 1, 13), Error);
}

Tensor BoolScalar(bool b) {
  Tensor t(DataType::kBool, {});
  t.SetDouble(0, b);
  return t;
}

TEST(ElementwiseOps, DropoutInferenceAndZeroRatioAreExactIdentity) {
  Tensor x = RandomTensor(DataType::kFloat32, {3, 5});
  for (int opset : {7, 10, 13}) {
    auto out = RunOp("Dropout", {x}, {{"ratio", Attribute::Float(0.3f)}}, 2, opset);
    ExpectClose(out[0], x, 0, 0);
    EXPECT_EQ(out[1].dtype(), opset >= 10 ? DataType::kBool : DataType::kFloat32);
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(out[1].GetDouble(i), 1.0);
  }
  Tensor zero(DataType::kFloat32, {});
  auto out = RunOp("Dropout", {x, zero, BoolScalar(true)}, {}, 2, 13, {1, 2});
  ExpectClose(out[0], x, 0, 0);
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(out[1].GetDouble(i), 1.0);
}

TEST(ElementwiseOps, DropoutTrainingDrawsFreshMasksEachStep) {
  Graph g;
  g.opset_imports[""] = 13;
  Value* x = g.AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({4000});
  g.inputs.push_back(x);
  Tensor r(DataType::kFloat32, {});
  r.SetDouble(0, 0.5);
  Value* ratio = g.AddInitializer("ratio", r);
  Value* mode = g.AddInitializer("mode", BoolScalar(true));
  Value* y = g.AddValue("y");
  Value* m = g.AddValue("m");
  g.outputs = {y, m};
  Node* n = g.AddNode("Dropout", {x, ratio, mode}, {y, m}, "drop");
  n->opset = 13;
  Executor ex(g);
  Tensor xv = RandomTensor(DataType::kFloat32, {4000}, 0.5, 1.5);
  auto o1 = ex.Run({{"x", xv}});
  EXPECT_TRUE(ex.last_has_random_kernels());
  auto o2 = ex.Run({{"x", xv}});
  int64_t kept = 0, differ = 0;
  for (int64_t i = 0; i < 4000; ++i) {
    const bool k1 = o1[1].GetDouble(i) != 0, k2 = o2[1].GetDouble(i) != 0;
    kept += k1;
    differ += k1 != k2;
    ASSERT_FLOAT_EQ(o1[0].GetDouble(i), k1 ? 2 * xv.GetDouble(i) : 0.0);
  }
  EXPECT_NEAR(kept / 4000.0, 0.5, 0.05);
  EXPECT_GT(differ, 1000);  // each step draws a new mask
}

}  // namespace
}  // namespace ot
